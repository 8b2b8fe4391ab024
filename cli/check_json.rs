//! `check --json` on two threads: a second thread writes the document while
//! the first makes the `ones-vector` notes, the last of its diagnostics. The
//! writer reaches the diagnostics (after every value's shape, most of the
//! document) at about the time the notes are made, then waits for them and
//! writes them last, so the output is what the sequential command wrote
//! (`Model::check_releasing`, then `write_check_json`). The writer
//! allocates little (an output buffer, the values' names for the check that
//! they are distinct), so the second thread adds little to the peak memory.

use diamond::check::json::pending_check_json;
use diamond::check::PendingNotes;
use diamond::check::{Diagnostic, Report as CheckReport};
use diamond::Model;
use std::io::{BufWriter, Write};
use std::sync::{Condvar, Mutex};

/// Writes the `--json` document for `report` to the standard output while
/// `ones` makes its notes; gives the notes back (the output carries them).
pub fn write_overlapped(model: &Model, report: &CheckReport, ones: PendingNotes, name: &str) -> Vec<Diagnostic> {
    // Everything the writer needs is allocated here: its first allocation
    // would take the second thread a fresh region of the allocator's.
    let handoff = Handoff { notes: Mutex::new(None), ready: Condvar::new() };
    let document = pending_check_json(report, name, || handoff.take());
    let out = BufWriter::with_capacity(OUTPUT_BUFFER, std::io::stdout());
    std::thread::scope(|scope| {
        let writer = std::thread::Builder::new().spawn_scoped(scope, move || {
            let mut out = out;
            let written = document.write(&mut out);
            finish(written, out)
        });
        let notes = {
            let _unblock = UnblockOnPanic(&handoff);
            ones.make(model, report)
        };
        match writer {
            Ok(writer) => {
                handoff.give(notes.clone());
                if let Err(panic) = writer.join() {
                    std::panic::resume_unwind(panic);
                }
            }
            // No second thread: the document is written here, in turn.
            Err(_) => {
                let out = BufWriter::with_capacity(OUTPUT_BUFFER, std::io::stdout());
                let mut out = out;
                let written = pending_check_json(report, name, || notes.clone()).write(&mut out);
                finish(written, out);
            }
        }
        notes
    })
}

/// The output's buffer: the document is a few MB on a large graph.
const OUTPUT_BUFFER: usize = 1 << 16;

/// Ends the document with a newline and flushes it. Like `emit`, a closed
/// output (`| head`) is not the model's problem: a failed write is ignored.
fn finish(written: serde_json::Result<()>, mut out: BufWriter<std::io::Stdout>) {
    let written = written.map_err(std::io::Error::from).and_then(|()| out.write_all(b"\n")).and_then(|()| out.flush());
    drop(written);
}

/// The notes, passed from the thread that makes them to the writer.
struct Handoff {
    notes: Mutex<Option<Vec<Diagnostic>>>,
    ready: Condvar,
}

impl Handoff {
    fn give(&self, notes: Vec<Diagnostic>) {
        *self.notes.lock().unwrap_or_else(|e| e.into_inner()) = Some(notes);
        self.ready.notify_one();
    }

    /// Waits for the notes.
    fn take(&self) -> Vec<Diagnostic> {
        let mut notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(notes) = notes.take() {
                return notes;
            }
            notes = self.ready.wait(notes).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Gives the writer no notes if making them panics: the scope waits for the
/// writer before the panic goes on.
struct UnblockOnPanic<'a>(&'a Handoff);

impl Drop for UnblockOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.give(Vec::new());
        }
    }
}
