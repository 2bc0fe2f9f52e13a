//! Builder threads run below the priority of the thread that starts them
//! (`atc_builder_priority`), so that a build takes the CPU requests leave. A test binary of its
//! own: the setting is process-wide, and the test counts the process's builder threads.

use std::ffi::c_char;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use atc_router_ffi::*;

fn p(s: &str) -> *const c_char {
    s.as_ptr().cast()
}

/// The nice value of each builder thread of this process (by thread name, as the kernel cuts
/// it to 15 bytes).
fn builder_nices() -> Vec<i64> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != "atc-router-buil" {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the command (which is in parentheses): state is field 3, nice field 19.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let nice: i64 = after.split(' ').nth(16).unwrap().parse().unwrap();
        out.push(nice);
    }
    out
}

fn own_nice() -> i64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(16).unwrap().parse().unwrap()
}

#[test]
fn builder_threads_run_below_the_callers_priority() {
    assert_eq!(atc_builder_priority(-1), ATC_ERR_INVALID);
    assert_eq!(atc_builder_priority(20), ATC_ERR_INVALID);
    assert_eq!(atc_builder_priority(5), ATC_BUILDER_NICE_DEFAULT);
    assert_eq!(atc_builder_priority(5), 5);
    unsafe {
        let s = atc_schema_new();
        let name = "http.path";
        atc_schema_add_field(
            s,
            p(name),
            name.len(),
            ATC_TYPE_STRING,
            null_mut(),
            null_mut(),
        );
        let r = atc_router_new(s, null_mut(), null_mut());
        let text = "1\ta8f2c1e4-0000-4000-8000-000000000001\thttp.path ^= \"/a\"\n";
        let rc = atc_router_sync_start_text(
            r,
            1,
            p(text),
            text.len(),
            ATC_TEXT_COPY,
            ATC_SYNC_ALL_OR_NOTHING,
            null_mut(),
            null_mut(),
        );
        assert_eq!(rc, ATC_OK);
        let started = Instant::now();
        while atc_router_sync_ready(r) != 1 {
            assert!(started.elapsed() < Duration::from_secs(60));
            std::thread::sleep(Duration::from_millis(1));
        }
        // The thread set its own priority before it built anything.
        assert_eq!(builder_nices(), vec![(own_nice() + 5).min(19)]);
        assert_eq!(own_nice(), own_nice(), "the caller's priority is its own");
        atc_router_free(r);
        atc_schema_free(s);
    }
    assert!(
        builder_nices().is_empty(),
        "the thread ended with its router"
    );
}
