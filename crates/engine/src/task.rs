//! The server's applier work: the ordered [`Task`]s the engine queues, and which one an
//! applier may take next ([`TaskQueue`]): serial tasks run alone, and nothing after the pause
//! point starts.

use std::collections::VecDeque;

use base::{Gtid, Seqno};
use group::StateRequest;
use writeset::WriteSet;

use crate::pause::PauseGate;
use crate::server_view::ViewInfo;

/// One piece of work for the server's appliers, in order.
#[derive(Clone, Debug)]
pub enum Task {
    /// The node joined a primary component: the server hears of it (`connected`).
    Connected(ViewInfo),
    /// A view change; `ordered` when it took a seqno (a primary view in the total order).
    View {
        /// The view as the server sees it.
        view: ViewInfo,
        /// True when it takes a seqno and passes the monitors.
        ordered: bool,
    },
    /// Apply a write-set (or, `failed`, pass its seqno as a rollback).
    Apply {
        /// Its seqno.
        seqno: Seqno,
        /// What it must wait for.
        depends_on: Seqno,
        /// The write-set.
        write_set: WriteSet,
        /// It failed certification: the server only passes its seqno.
        failed: bool,
    },
    /// A seqno with nothing to apply (a view or an undecodable write-set received by IST):
    /// it only passes the monitors.
    Skip {
        /// The seqno.
        seqno: Seqno,
    },
    /// The node caught up with the cluster (`synced`).
    Synced,
    /// Ask the server for its state transfer request and send it to the group.
    RequestState,
    /// Serve a joiner: with `bypass`, the server only confirms the joiner's own position
    /// (the data goes by IST); otherwise it sends a snapshot once everything ordered before
    /// the request is committed.
    Donate {
        /// The joiner's request.
        request: StateRequest,
        /// Everything up to here must be committed before a snapshot starts.
        wait_for: Seqno,
        /// The joiner's own position, when the data goes by IST.
        bypass: Option<Gtid>,
    },
}

impl Task {
    /// Serial tasks run alone: nothing else is applying while they run.
    pub fn is_serial(&self) -> bool {
        !matches!(self, Task::Apply { .. } | Task::Skip { .. })
    }

    /// The seqno the task takes in the server, for tasks that take one: these are what
    /// `pause` holds back after its point (see [`PauseGate`]).
    pub fn ordered_seqno(&self) -> Option<Seqno> {
        match self {
            Task::Apply { seqno, .. } | Task::Skip { seqno } => Some(*seqno),
            Task::View {
                view,
                ordered: true,
            } => Some(view.state_id.seqno),
            _ => None,
        }
    }
}

/// The queue of tasks and what the appliers are running now.
#[derive(Debug, Default)]
pub struct TaskQueue {
    queue: VecDeque<Task>,
    /// Parallel tasks running now.
    applying_now: usize,
    /// A serial task is running.
    serial_running: bool,
    /// The serial task running takes a seqno (an ordered view): `pause` waits for it.
    ordered_serial_running: bool,
    /// Tasks ever queued: a driver compares it with what it last saw to know whether to
    /// wake its appliers.
    pushed: u64,
}

impl TaskQueue {
    /// Queues a task at the end.
    pub fn push(&mut self, task: Task) {
        self.queue.push_back(task);
        self.pushed += 1;
    }

    /// How many tasks were ever queued.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Tasks waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True when no task waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The tasks waiting, first first.
    pub fn iter(&self) -> impl Iterator<Item = &Task> {
        self.queue.iter()
    }

    /// Parallel tasks running now.
    pub fn applying_now(&self) -> usize {
        self.applying_now
    }

    /// A serial task is running.
    pub fn serial_running(&self) -> bool {
        self.serial_running
    }

    /// Something that takes a seqno is running (what `pause` waits for).
    pub fn ordered_work_running(&self) -> bool {
        self.applying_now > 0 || self.ordered_serial_running
    }

    /// Keeps only the tasks `keep` accepts.
    pub fn retain(&mut self, keep: impl FnMut(&Task) -> bool) {
        self.queue.retain(keep);
    }

    /// Takes the next task if an applier may run it now: a serial one only when nothing
    /// runs, a parallel one when no serial one runs, and neither when `pause` holds its
    /// seqno. The taken task counts as running until [`TaskQueue::finish`].
    pub fn take_next(&mut self, pause: &mut PauseGate) -> Option<Task> {
        let front = self.queue.front()?;
        let held = front.ordered_seqno().is_some_and(|s| pause.holds(s));
        let free = if front.is_serial() {
            self.applying_now == 0 && !self.serial_running && !held
        } else {
            !self.serial_running && !held
        };
        if !free {
            return None;
        }
        let task = self.queue.pop_front().expect("front exists");
        if let Some(seqno) = task.ordered_seqno() {
            pause.started(seqno);
        }
        if task.is_serial() {
            self.serial_running = true;
            self.ordered_serial_running = task.ordered_seqno().is_some();
        } else {
            self.applying_now += 1;
        }
        Some(task)
    }

    /// An applier finished the task it took (`serial`: a serial one).
    pub fn finish(&mut self, serial: bool) {
        if serial {
            assert!(self.serial_running, "a serial task finished that never ran");
            self.serial_running = false;
            self.ordered_serial_running = false;
        } else {
            assert!(self.applying_now > 0, "a task finished that never ran");
            self.applying_now -= 1;
        }
    }

    /// Where a task for `seqno` waits in the queue, if it does.
    pub fn position_of(&self, seqno: Seqno) -> Option<usize> {
        self.queue.iter().position(|task| match task {
            Task::Apply { seqno: s, .. } => *s == seqno,
            Task::View { view, .. } => view.state_id.seqno == seqno,
            _ => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skip(seqno: i64) -> Task {
        Task::Skip {
            seqno: Seqno(seqno),
        }
    }

    #[test]
    fn a_serial_task_runs_alone() {
        let mut pause = PauseGate::default();
        let mut queue = TaskQueue::default();
        queue.push(skip(1));
        queue.push(Task::Synced);
        queue.push(skip(2));
        assert!(queue.take_next(&mut pause).is_some());
        assert!(queue.take_next(&mut pause).is_none(), "waits for the skip");
        queue.finish(false);
        assert!(matches!(queue.take_next(&mut pause), Some(Task::Synced)));
        assert!(
            queue.take_next(&mut pause).is_none(),
            "the serial task runs"
        );
        queue.finish(true);
        assert!(queue.take_next(&mut pause).is_some());
    }

    #[test]
    fn nothing_after_the_pause_point_is_taken() {
        let mut pause = PauseGate::default();
        let mut queue = TaskQueue::default();
        queue.push(skip(1));
        queue.push(skip(2));
        assert!(queue.take_next(&mut pause).is_some());
        assert_eq!(pause.pause(Seqno(0)), Seqno(1));
        assert!(queue.take_next(&mut pause).is_none());
        pause.resume();
        assert!(queue.take_next(&mut pause).is_some());
        assert_eq!(queue.applying_now(), 2);
    }
}
