//! The server's appliers as the engine sees them: the next task one may take, and its end.

use crate::task::Task;
use crate::NodeEngine;

/// What an applier finds when it asks for work (see [`NodeEngine::next_task`]).
#[derive(Debug)]
pub enum NextTask {
    /// This task, which counts as running until [`NodeEngine::task_done`].
    Run(Task),
    /// Nothing it may take now: wait for the engine to change.
    Wait,
    /// The node left the cluster after losing a consistency vote: its data differs.
    Inconsistent,
    /// The node closed: the applier returns.
    Closed,
}

impl NodeEngine {
    /// The next task an applier may run, or why none.
    pub fn next_task(&mut self) -> NextTask {
        if let Some(task) = self.tasks.take_next(&mut self.pause) {
            return NextTask::Run(task);
        }
        if !self.tasks.is_empty() {
            return NextTask::Wait;
        }
        if self.votes.inconsistent && !self.life.connected {
            return NextTask::Inconsistent;
        }
        if self.stopped() {
            return NextTask::Closed;
        }
        NextTask::Wait
    }

    /// An applier finished the task it took (`serial`: a serial one).
    pub fn task_done(&mut self, serial: bool) {
        self.tasks.finish(serial);
    }
}
