//! Coverage marks: named points on rare branches, counted so that the simulator can show
//! it reaches them (in the spirit of TigerBeetle's `marks`).
//!
//! `mark!("name")` on a branch counts a hit only on a thread that asked for counting with
//! [`count_on_this_thread`] (the simulator does, for each run); everywhere else it is one
//! thread-local flag read. Counting is per thread because one simulated run is one thread's
//! work: runs on other threads never see each other's hits. It is a runtime switch, not a
//! cargo feature, so that a workspace build (which unifies features) never turns it on in
//! the provider.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

/// Counts a hit of the mark `name` (see the module docs). Names are string literals in
/// the form `crate.what_happened`.
#[macro_export]
macro_rules! mark {
    ($name:literal) => {
        $crate::marks::hit($name)
    };
}

std::thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static HITS: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
}

/// Starts counting hits on this thread, from zero.
pub fn count_on_this_thread() {
    COUNTING.with(|counting| counting.set(true));
    HITS.with(|hits| hits.borrow_mut().clear());
}

/// Counts a hit of `name` if this thread counts (see [`count_on_this_thread`]).
#[inline]
pub fn hit(name: &'static str) {
    if COUNTING.with(Cell::get) {
        HITS.with(|hits| *hits.borrow_mut().entry(name).or_default() += 1);
    }
}

/// Stops counting on this thread and hands over the hits counted since
/// [`count_on_this_thread`], by mark.
pub fn take() -> BTreeMap<&'static str, u64> {
    COUNTING.with(|counting| counting.set(false));
    HITS.with(|hits| std::mem::take(&mut *hits.borrow_mut()))
}

#[cfg(test)]
mod tests {
    #[test]
    #[allow(clippy::disallowed_methods)] // A second thread, to show its hits are its own.
    fn hits_are_counted_per_thread_only_when_asked_and_taken_once() {
        crate::mark!("base.test_mark");
        super::count_on_this_thread();
        crate::mark!("base.test_mark");
        crate::mark!("base.test_mark");
        std::thread::spawn(|| {
            super::count_on_this_thread();
            crate::mark!("base.test_mark");
        })
        .join()
        .unwrap();
        let hits = super::take();
        assert_eq!(hits.get("base.test_mark"), Some(&2));
        crate::mark!("base.test_mark");
        assert!(super::take().is_empty(), "counting stopped with the take");
    }
}
