//! The labs' progress in the browser's localStorage. A browser may block storage (a private
//! window, a policy), have it full, or hold something another version wrote: each is a message
//! the labs page shows, and the labs keep working with the progress in memory.
//!
//! web-sys directly, not gloo-storage: gloo's `LocalStorage` throws a JavaScript exception when
//! storage is blocked (`expect_throw` on `window.localStorage`), and `window.local_storage()`
//! gives that case back as an error the page can explain.

use leptos::prelude::*;

use crate::lab_progress::{self, Progress};
use crate::labs::Lab;

const KEY: &str = "moescope.labs.progress";

fn storage() -> Result<web_sys::Storage, String> {
    let blocked = "this browser does not let the page use localStorage";
    web_sys::window()
        .ok_or_else(|| blocked.to_owned())?
        .local_storage()
        .map_err(|_| blocked.to_owned())?
        .ok_or_else(|| blocked.to_owned())
}

/// The saved progress, and why it could not be read, if it could not.
pub fn load(labs: &[Lab]) -> (Progress, Option<String>) {
    let stored = storage().and_then(|s| {
        s.get_item(KEY)
            .map_err(|_| "localStorage could not be read".to_owned())
    });
    match stored {
        Err(e) => (Progress::new(), Some(e)),
        Ok(None) => (Progress::new(), None),
        Ok(Some(text)) => match lab_progress::import(&text, labs) {
            Ok((p, warnings)) if warnings.is_empty() => (p, None),
            Ok((p, warnings)) => (p, Some(warnings.join("; "))),
            Err(e) => (
                Progress::new(),
                Some(format!("the saved progress was unusable: {e}")),
            ),
        },
    }
}

pub fn save(progress: &Progress) -> Result<(), String> {
    storage()?
        .set_item(KEY, &progress.to_json())
        .map_err(|_| "localStorage is full or read-only".to_owned())
}

/// The progress as a signal, loaded now and saved whenever it changes, with the storage's
/// problem (if any) as a second signal for the page to show.
pub fn signal(labs: &[Lab]) -> (RwSignal<Progress>, RwSignal<Option<String>>) {
    let (loaded, problem) = load(labs);
    let progress = RwSignal::new(loaded);
    let problem = RwSignal::new(problem);
    Effect::new(move |first: Option<()>| {
        let now = progress.with(save).err();
        // The first run only saves what was just loaded: a load problem stays on screen.
        if (first.is_some() || now.is_some()) && problem.with_untracked(|p| *p != now) {
            problem.set(now);
        }
    });
    (progress, problem)
}
