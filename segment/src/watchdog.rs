//! A hang turned into a failure, for tests (feature `testing`): armed
//! around a step that may wait forever when the code under test is wrong
//! (an acknowledgement that never comes, a walk that never ends), it exits
//! the process with what hung once `limit` passes. Dropping it disarms it.
//! The limit is generous; it asserts nothing about speed.

use std::io::Write;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// See the [module](self).
#[derive(Debug)]
pub struct Watchdog {
    disarm: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Exits the process (status 101, a test failure) naming `what` unless
    /// dropped within `limit`.
    pub fn arm(what: impl Into<String>, limit: Duration) -> Watchdog {
        let what = what.into();
        let (disarm, armed) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = armed.recv_timeout(limit) {
                // Straight to stderr: the test harness captures eprintln!,
                // and its capture is lost when the process exits.
                let _ = writeln!(
                    std::io::stderr(),
                    "WATCHDOG: {what} did not finish within {limit:?}: it hangs"
                );
                std::process::exit(101);
            }
        });
        Watchdog {
            disarm: Some(disarm),
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.disarm.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
