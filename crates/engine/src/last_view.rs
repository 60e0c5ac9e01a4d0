//! The last primary view this node applied, kept on disk for a restore after a full crash
//! (Galera's `gvwstate.dat`; the rule is `group::recovery`). A view is saved only once every
//! seqno up to it is committed here: a node that saved it holds all the cluster ordered
//! before it. It is forgotten when the node leaves cleanly or loses a consistency vote.

use base::Seqno;
use group::recovery::LastPrimaryView;
use group::View;

use crate::{LogLevel, NodeEngine};

/// The view waiting to be saved, and the one saved last.
#[derive(Debug, Default)]
pub(crate) struct LastViewKeeping {
    pending: Option<LastPrimaryView>,
    saved: Option<LastPrimaryView>,
}

impl NodeEngine {
    /// Notes a primary view this node is in; [`NodeEngine::keep_last_view`] saves it.
    pub(crate) fn note_primary_view(&mut self, view: &View) {
        if let Some(last) = LastPrimaryView::from_view(view) {
            self.last_view.pending = Some(last);
        }
    }

    /// Saves the noted view once `committed` reaches it.
    pub(crate) fn keep_last_view(&mut self, committed: Seqno) {
        let due = self
            .last_view
            .pending
            .as_ref()
            .is_some_and(|view| committed.is_defined() && view.seqno <= committed);
        if !due {
            return;
        }
        let view = self.last_view.pending.take().expect("checked just above");
        if self.last_view.saved.as_ref() == Some(&view) {
            return;
        }
        if let Err(error) = self.store.save_view(&view) {
            self.say(
                LogLevel::Warning,
                format!("cannot save the last primary view: {error}"),
            );
            return;
        }
        self.last_view.saved = Some(view);
    }

    /// Forgets the saved view: after a clean leave (as Galera removes `gvwstate.dat`) or a
    /// lost vote, nothing is restored from it.
    pub fn forget_last_view(&mut self) {
        self.last_view = LastViewKeeping::default();
        if let Err(error) = self.store.forget_view() {
            let message = format!("cannot forget the last primary view: {error}");
            self.say(LogLevel::Warning, message);
        }
    }

    /// The last primary view saved for a restore, read when the node connects. A damaged
    /// file is said and not used: the node then joins as usual.
    pub fn saved_last_view(&mut self) -> Option<LastPrimaryView> {
        match self.store.load_view() {
            Ok(view) => view,
            Err(error) => {
                let message = format!(
                    "{error}: this node will not restore the primary component by itself \
                     after a full crash"
                );
                self.say(LogLevel::Warning, message);
                None
            }
        }
    }
}
