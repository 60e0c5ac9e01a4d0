//! The options that follow others, resolved after every entry is read, and the checks on
//! their relationships.

use super::*;

impl ProviderOptions {
    /// Computes the derived options from what was given and from the options they follow.
    /// The order matters: the listen address may set `base_port`, which the IST addresses
    /// then follow.
    pub(super) fn resolve(&mut self, explicit: &Explicit) -> Result<(), OptionsError> {
        self.socket_ssl = self.resolve_socket_ssl(explicit.socket_ssl);
        let listen = self.resolve_listen_addr(explicit.listen_addr.as_ref())?;
        self.base_port = listen.port;
        self.gmcast_listen_addr = listen;
        self.ist_recv_addr =
            self.resolve_ist_addr(Setting::IstRecvAddr, explicit.ist_recv_addr.as_ref())?;
        self.ist_recv_bind = match &explicit.ist_recv_bind {
            Some(partial) => Some(self.resolve_ist_addr(Setting::IstRecvBind, Some(partial))?),
            None => None,
        };
        self.gcache_dir = explicit
            .gcache_dir
            .clone()
            .unwrap_or_else(|| self.base_dir.clone());
        Ok(())
    }

    /// As in Galera: a certificate or a key turns TLS on unless `socket.ssl` says no
    /// ([`ProviderOptions::validate`] then asks for both).
    pub(super) fn resolve_socket_ssl(&self, given: Option<bool>) -> bool {
        given.unwrap_or(self.socket_ssl_cert.is_some() || self.socket_ssl_key.is_some())
    }

    pub(super) fn resolve_listen_addr(
        &self,
        given: Option<&PartialEndpoint>,
    ) -> Result<Endpoint, OptionsError> {
        let scheme = if self.socket_ssl {
            Scheme::Ssl
        } else {
            Scheme::Tcp
        };
        let Some(given) = given else {
            return Ok(Endpoint {
                scheme: Some(scheme),
                host: "0.0.0.0".to_owned(),
                port: self.base_port,
            });
        };
        self.check_scheme(Setting::GmcastListenAddr, given)?;
        // Like Galera: with TLS on, a tcp:// listen address is served over TLS anyway.
        Ok(Endpoint {
            scheme: Some(scheme),
            ..given.with_default_port(self.base_port)
        })
    }

    pub(super) fn resolve_ist_addr(
        &self,
        key: Setting,
        given: Option<&PartialEndpoint>,
    ) -> Result<Endpoint, OptionsError> {
        if let Some(given) = given {
            self.check_scheme(key, given)?;
            if let Some(port) = given.port {
                return Ok(given.with_default_port(port));
            }
        }
        let port = self.base_port.checked_add(1).ok_or_else(|| {
            OptionsError::Inconsistent(format!(
                "{} needs a port: base_port {} leaves no room for the default base_port + 1",
                key.name(),
                self.base_port
            ))
        })?;
        Ok(match given {
            Some(given) => given.with_default_port(port),
            None => Endpoint {
                scheme: None,
                host: self.base_host.clone(),
                port,
            },
        })
    }

    pub(super) fn check_scheme(
        &self,
        key: Setting,
        given: &PartialEndpoint,
    ) -> Result<(), OptionsError> {
        if given.scheme == Some(Scheme::Ssl) && !self.socket_ssl {
            return Err(OptionsError::Inconsistent(format!(
                "{} uses ssl:// but socket.ssl is off (set socket.ssl_cert and socket.ssl_key)",
                key.name()
            )));
        }
        Ok(())
    }

    /// Whether `value` for the static option `key` is the value in effect, so that setting
    /// it at runtime changes nothing. Derived options are resolved against the options in
    /// effect.
    pub(super) fn is_current_value(&self, key: Setting, value: &str) -> Result<bool, OptionsError> {
        let mut probe = self.clone();
        let mut explicit = Explicit::default();
        probe.apply(key, value, &mut explicit)?;
        match key {
            Setting::GcacheDir => {
                probe.gcache_dir = explicit.gcache_dir.unwrap_or_else(|| self.base_dir.clone());
            }
            Setting::GmcastListenAddr => {
                probe.gmcast_listen_addr =
                    self.resolve_listen_addr(explicit.listen_addr.as_ref())?;
            }
            Setting::IstRecvAddr => {
                probe.ist_recv_addr =
                    self.resolve_ist_addr(key, explicit.ist_recv_addr.as_ref())?;
            }
            Setting::IstRecvBind => {
                probe.ist_recv_bind = match &explicit.ist_recv_bind {
                    Some(partial) => Some(self.resolve_ist_addr(key, Some(partial))?),
                    None => None,
                };
            }
            Setting::SocketSsl => probe.socket_ssl = self.resolve_socket_ssl(explicit.socket_ssl),
            _ => debug_assert!(!key.derived()),
        }
        Ok(probe.value_text(key) == self.value_text(key))
    }

    /// Checks the relationships between options.
    pub(super) fn validate(&self) -> Result<(), OptionsError> {
        self.group_config().validate().map_err(from_group_error)?;
        if self.gcache_max_disk_bytes != 0 && self.gcache_max_disk_bytes < self.gcache_size {
            return Err(OptionsError::Inconsistent(format!(
                "gcache.max_disk_bytes ({}) is below gcache.size ({})",
                format_size(self.gcache_max_disk_bytes),
                format_size(self.gcache_size)
            )));
        }
        if self.socket_ssl {
            let missing: Vec<&str> = [
                (Setting::SocketSslCert, &self.socket_ssl_cert),
                (Setting::SocketSslKey, &self.socket_ssl_key),
            ]
            .into_iter()
            .filter(|(_, file)| file.is_none())
            .map(|(key, _)| key.name())
            .collect();
            if !missing.is_empty() {
                return Err(OptionsError::Inconsistent(format!(
                    "TLS is on (socket.ssl, or a certificate or key given) but {}: it \
                     needs both socket.ssl_cert and socket.ssl_key (socket.ssl = no turns \
                     it off)",
                    match missing.as_slice() {
                        [one] => format!("{one} is not set"),
                        _ => "neither is set".to_owned(),
                    }
                )));
            }
        }
        Ok(())
    }
}
