//! What a user sees of an error's CONTEXT lines.
//!
//! PostgreSQL adds a line to an error's CONTEXT for each frame it passed
//! through: a PL/pgSQL function's line, the SQL statement it ran. An error
//! raquel raises from a verb written in PL/pgSQL passes through its helpers
//! in `raquel_internal` (`SQL statement "SELECT raquel_internal.rq_refuse(
//! 'role_unknown', …)"`), which a user can act on no more than on a line of
//! C: they are left out. The frames of the user's own code and of raquel's
//! public functions stay, so that a user still sees where a call of theirs
//! failed. The same goes for the server log, which gets the same report.
//!
//! An `emit_log_hook` (PostgreSQL calls it for every report, before the
//! report goes to the client and the log), installed when the library
//! loads. It runs inside error reporting, where nothing may fail: it only
//! shortens the report's context string in place, allocating nothing, and
//! never raises or panics across its C boundary.

use pgrx::pg_sys;

/// The hook that was installed before raquel's, called after it.
static mut PREVIOUS: pg_sys::emit_log_hook_type = None;

/// Installs the hook, once a process (from `_PG_init`).
pub fn install() {
    // SAFETY: _PG_init runs once a process, before any report this hook
    // sees; the hook chain is a plain global of the backend.
    unsafe {
        PREVIOUS = pg_sys::emit_log_hook;
        pg_sys::emit_log_hook = Some(leave_out_internal_frames);
    }
}

/// What a frame's line must hold to be raquel's internal helper's.
const INTERNAL: &[u8] = b"raquel_internal.";

/// The lines PostgreSQL begins a CONTEXT frame with; a line that begins
/// with none of them continues the frame before (a multi-line statement).
const FRAME_STARTS: &[&[u8]] = &[
    b"SQL statement \"",
    b"PL/pgSQL function ",
    b"SQL function \"",
    b"SQL expression \"",
    b"PL/pgSQL assignment \"",
    b"PL/pgSQL expression ",
    b"parallel worker",
    b"COPY ",
    b"JSON data",
    b"portal \"",
    b"extension script file ",
];

unsafe extern "C-unwind" fn leave_out_internal_frames(edata: *mut pg_sys::ErrorData) {
    // SAFETY: PostgreSQL passes the report being emitted; its context is a
    // NUL-terminated string of ErrorContext's, ours to change in place.
    unsafe {
        if !edata.is_null() && !(*edata).context.is_null() {
            let context = (*edata).context;
            let length = std::ffi::CStr::from_ptr(context).to_bytes().len();
            let bytes = std::slice::from_raw_parts_mut(context.cast::<u8>(), length);
            // (nothing below panics; were it to, the report is left as it was)
            let kept = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| keep_user_frames(bytes)));
            match kept {
                Ok(0) => (*edata).context = std::ptr::null_mut(),
                Ok(kept) => *context.add(kept) = 0,
                Err(_) => {}
            }
        }
        if let Some(previous) = PREVIOUS {
            previous(edata);
        }
    }
}

/// Moves the frames of `context` that are not raquel's internal helpers'
/// to its front, in order, and returns their length (without a trailing
/// newline). `context` is left as it was when every frame is kept.
fn keep_user_frames(context: &mut [u8]) -> usize {
    if !context.windows(INTERNAL.len()).any(|w| w == INTERNAL) {
        return context.len();
    }
    // each frame: its first line and the lines that continue it
    let mut frames: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    while start <= context.len() {
        let end = context[start..].iter().position(|&b| b == b'\n').map_or(context.len(), |n| start + n);
        let line = &context[start..end];
        let begins_a_frame = FRAME_STARTS.iter().any(|p| line.starts_with(p));
        match frames.last_mut() {
            Some(frame) if !begins_a_frame => frame.1 = end,
            _ => frames.push((start, end)),
        }
        start = end + 1;
    }
    let mut kept = 0;
    for (from, to) in frames {
        if context[from..to].windows(INTERNAL.len()).any(|w| w == INTERNAL) {
            continue;
        }
        if kept > 0 {
            context[kept] = b'\n';
            kept += 1;
        }
        context.copy_within(from..to, kept);
        kept += to - from;
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::keep_user_frames;

    fn kept(context: &str) -> String {
        let mut bytes = context.as_bytes().to_vec();
        let n = keep_user_frames(&mut bytes);
        String::from_utf8(bytes[..n].to_vec()).unwrap()
    }

    #[test]
    fn a_helpers_frames_go_and_the_callers_stay() {
        assert_eq!(
            kept(
                "SQL statement \"SELECT raquel_internal.rq_refuse('role_unknown', ARRAY['x'])\"\n\
                 PL/pgSQL function public.a_verb(regrole) line 7 at PERFORM\n\
                 PL/pgSQL function my_setup() line 3 at PERFORM"
            ),
            "PL/pgSQL function public.a_verb(regrole) line 7 at PERFORM\n\
             PL/pgSQL function my_setup() line 3 at PERFORM"
        );
    }

    #[test]
    fn a_statement_of_several_lines_goes_whole() {
        assert_eq!(
            kept(
                "PL/pgSQL function raquel_internal.rq_x(integer) line 2 at RAISE\n\
                 SQL statement \"SELECT raquel_internal.rq_x(1,\n    2)\"\n\
                 SQL function \"rq_stats\" statement 1"
            ),
            "SQL function \"rq_stats\" statement 1"
        );
    }

    #[test]
    fn a_context_of_helpers_alone_is_emptied_and_others_are_left_alone() {
        assert_eq!(kept("PL/pgSQL function raquel_internal.rq_x() line 1 at RAISE"), "");
        let user = "SQL statement \"SELECT f(\n1)\"\nPL/pgSQL function g() line 1 at PERFORM";
        assert_eq!(kept(user), user);
    }
}
