//! The write-set cache's settings, built from the `gcache.*` options in one place.

use std::path::PathBuf;

use gcache::GcacheConfig;

use crate::ProviderOptions;

impl ProviderOptions {
    /// The gcache's settings (`gcache.name` may be a path of its own, else it is a file
    /// in `gcache.dir`).
    pub fn gcache_config(&self) -> GcacheConfig {
        let path = self.gcache_path();
        let dir = path
            .parent()
            .map_or_else(|| PathBuf::from("."), |p| p.to_path_buf());
        let name = path.file_name().map_or_else(
            || self.gcache_name.clone(),
            |n| n.to_string_lossy().into_owned(),
        );
        GcacheConfig {
            dir,
            name,
            size: self.gcache_size,
            page_size: self.gcache_page_size,
            keep_pages_size: self.gcache_keep_pages_size,
            keep_seconds: self.gcache_keep_seconds,
            max_disk_bytes: self.gcache_max_disk_bytes,
            recover: self.gcache_recover,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_file_is_named_by_gcache_name_in_gcache_dir_unless_it_is_a_path() {
        let mut options = ProviderOptions::default();
        options.gcache_dir = "/var/lib/mysql".into();
        options.gcache_name = "galera.cache".into();
        options.gcache_size = 1 << 30;
        let config = options.gcache_config();
        assert_eq!(config.dir, PathBuf::from("/var/lib/mysql"));
        assert_eq!(config.name, "galera.cache");
        assert_eq!(config.size, 1 << 30);
        options.gcache_name = "/big/disk/cache.ring".into();
        let config = options.gcache_config();
        assert_eq!(config.dir, PathBuf::from("/big/disk"));
        assert_eq!(config.name, "cache.ring");
    }
}
