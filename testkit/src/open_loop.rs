//! An open-loop HTTP/1.1 load generator: requests are sent at a fixed rate whatever the server
//! does, and each one's latency is counted from the time it was *due*, not from when a
//! connection was free to send it.
//!
//! Why not wrk: a closed-loop client waits for an answer before it sends the next request on
//! that connection, so while the server is held (a worker stalled by a push) it sends nothing,
//! and the stall shows up as one slow request per connection instead of as the thousands of
//! requests that arrived meanwhile and waited (coordinated omission). Here request `k` is due
//! at `start + k / rate`; if no connection is idle then, a new one is opened (up to
//! [`Plan::max_connections`]) or the request waits in a queue, and its latency still runs from
//! the due time. A run at a rate well below the server's capacity therefore measures what a
//! user would see.
//!
//! Invariants:
//! - One request in flight per connection (no pipelining): an answer is matched to the request
//!   sent last on its connection.
//! - Latency is `answer complete - due`; `send lag` is `sent - due` and says how late this
//!   client was (a late client inflates latency, so it is reported beside it).
//! - The loop never blocks on the network: sockets are non-blocking and waited for with epoll,
//!   and the next due time with a timerfd (microsecond precision, with the timer slack set to
//!   1 ns), so a due request is sent within microseconds even at tens of thousands per second.
//!
//! Linux only (epoll, timerfd).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// A request template: the bytes before and after a per-request counter, which makes every
/// request unique (so that no cache can answer a repeated one).
#[derive(Debug, Clone)]
pub struct Template {
    /// Bytes up to the counter.
    pub head: Vec<u8>,
    /// Bytes after it (the rest of the request line, the headers, the empty line).
    pub tail: Vec<u8>,
}

impl Template {
    /// A request without a counter.
    pub fn fixed(bytes: &[u8]) -> Template {
        Template {
            head: bytes.to_vec(),
            tail: Vec::new(),
        }
    }

    fn write(&self, counter: Option<u64>, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&self.head);
        if let (Some(c), false) = (counter, self.tail.is_empty()) {
            out.extend_from_slice(c.to_string().as_bytes());
        }
        out.extend_from_slice(&self.tail);
    }
}

/// Reads the request lines `ffi/examples/gateway_data.rs` writes (`requests.tsv`: mode, method,
/// host, path, query, headers as `name:value` joined by `\x1f`), as `lua/demo/wrk_requests.lua`
/// does: mode `S` appends `/<counter>` to the path, `R` replaces its trailing digits with the
/// counter, `K` puts `u=<counter>` in the query. `HEAD` is sent as `GET`.
pub fn read_requests_tsv(text: &str) -> Vec<Template> {
    let mut out = Vec::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.splitn(6, '\t').collect();
        let [mode, method, host, path, query, headers] = parts[..] else {
            continue;
        };
        let method = if method == "HEAD" { "GET" } else { method };
        let mut rest = format!(" HTTP/1.1\r\nHost: {host}\r\n");
        for pair in headers.split('\x1f') {
            if let Some((k, v)) = pair.split_once(':') {
                rest.push_str(&format!("{k}: {v}\r\n"));
            }
        }
        rest.push_str("\r\n");
        let (head, tail) = match mode {
            "K" => {
                let q = if query.is_empty() {
                    "?u=".to_owned()
                } else {
                    format!("?{query}&u=")
                };
                (format!("{method} {path}{q}"), rest)
            }
            "R" | "S" => {
                let base = if mode == "R" {
                    path.trim_end_matches(|c: char| c.is_ascii_digit())
                        .to_owned()
                } else {
                    format!("{}/", path.trim_end_matches('/'))
                };
                let q = if query.is_empty() {
                    String::new()
                } else {
                    format!("?{query}")
                };
                (format!("{method} {base}"), format!("{q}{rest}"))
            }
            _ => continue,
        };
        out.push(Template {
            head: head.into_bytes(),
            tail: tail.into_bytes(),
        });
    }
    out
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The server.
    pub addr: SocketAddr,
    /// Requests per second.
    pub rate: f64,
    /// How long to send.
    pub duration: Duration,
    /// Sent in turn, from a place that depends on nothing random.
    pub requests: Vec<Template>,
    /// Connections open at most; a request due while all are busy waits in a queue.
    pub max_connections: usize,
    /// How long to wait for the answers still in flight once sending stops.
    pub drain: Duration,
    /// A response header whose value each [`Sample`] keeps (lowercase name), if any.
    pub watch_header: Option<String>,
}

/// One request's fate.
#[derive(Debug, Clone)]
pub struct Sample {
    /// When it was due, from the start of the run.
    pub due: Duration,
    /// From due to sent.
    pub send_lag: Duration,
    /// From due to the answer's last byte; `None` when no answer came (an error).
    pub latency: Option<Duration>,
    /// The answer's status (0 without an answer).
    pub status: u16,
    /// The value of [`Plan::watch_header`] in the answer.
    pub header: Option<String>,
    /// The request's index in [`Plan::requests`].
    pub request: usize,
}

/// A run's samples, in due order.
#[derive(Debug, Default)]
pub struct Run {
    pub samples: Vec<Sample>,
    /// Connections opened in all.
    pub connections: usize,
}

/// Latency figures of a set of samples.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    pub count: usize,
    /// Answers with a status other than 2xx.
    pub non_2xx: usize,
    /// Requests without an answer.
    pub errors: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub p999: Duration,
    pub max: Duration,
    /// How late this client sent, at the 99th percentile.
    pub send_lag_p99: Duration,
}

impl Summary {
    /// The figures of the samples due in `from..to`.
    pub fn of(samples: &[Sample], from: Duration, to: Duration) -> Summary {
        let picked: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.due >= from && s.due < to)
            .collect();
        let mut lat: Vec<Duration> = picked.iter().filter_map(|s| s.latency).collect();
        let mut lag: Vec<Duration> = picked.iter().map(|s| s.send_lag).collect();
        lat.sort_unstable();
        lag.sort_unstable();
        let at = |v: &[Duration], q: f64| -> Duration {
            if v.is_empty() {
                return Duration::ZERO;
            }
            let i = ((v.len() as f64) * q).ceil() as usize;
            v[i.clamp(1, v.len()) - 1]
        };
        Summary {
            count: picked.len(),
            non_2xx: picked
                .iter()
                .filter(|s| s.latency.is_some() && !(200..300).contains(&s.status))
                .count(),
            errors: picked.iter().filter(|s| s.latency.is_none()).count(),
            p50: at(&lat, 0.50),
            p99: at(&lat, 0.99),
            p999: at(&lat, 0.999),
            max: lat.last().copied().unwrap_or_default(),
            send_lag_p99: at(&lag, 0.99),
        }
    }
}

/// A connection and the request in flight on it.
struct Conn {
    stream: TcpStream,
    /// Connect not yet complete (non-blocking connect in progress).
    connecting: bool,
    out: Vec<u8>,
    written: usize,
    inbuf: Vec<u8>,
    /// The sample index of the request in flight.
    in_flight: Option<usize>,
}

enum Parsed {
    Incomplete,
    Done {
        status: u16,
        header: Option<String>,
        len: usize,
        close: bool,
    },
    Bad,
}

/// Parses one whole response at the start of `buf` (Content-Length or chunked bodies).
fn parse_response(buf: &[u8], watch: Option<&str>) -> Parsed {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Parsed::Incomplete;
    };
    let Ok(head) = std::str::from_utf8(&buf[..end]) else {
        return Parsed::Bad;
    };
    let mut lines = head.split("\r\n");
    let Some(status) = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse::<u16>().ok())
    else {
        return Parsed::Bad;
    };
    let (mut length, mut chunked, mut close, mut header) = (None, false, false, None);
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k.eq_ignore_ascii_case("content-length") {
            length = v.parse::<usize>().ok();
        } else if k.eq_ignore_ascii_case("transfer-encoding") {
            chunked = v.eq_ignore_ascii_case("chunked");
        } else if k.eq_ignore_ascii_case("connection") {
            close = v.eq_ignore_ascii_case("close");
        }
        if watch.is_some_and(|w| k.eq_ignore_ascii_case(w)) {
            header = Some(v.to_owned());
        }
    }
    let body = end + 4;
    let len = if chunked {
        let mut at = body;
        loop {
            let Some(eol) = buf[at..].windows(2).position(|w| w == b"\r\n") else {
                return Parsed::Incomplete;
            };
            let size_text = std::str::from_utf8(&buf[at..at + eol]).unwrap_or("");
            let size_text = size_text.split(';').next().unwrap_or("").trim();
            let Ok(size) = usize::from_str_radix(size_text, 16) else {
                return Parsed::Bad;
            };
            at += eol + 2;
            if size == 0 {
                // No trailers from nginx: the last chunk ends with one more CRLF.
                if buf.len() < at + 2 {
                    return Parsed::Incomplete;
                }
                break at + 2;
            }
            if buf.len() < at + size + 2 {
                return Parsed::Incomplete;
            }
            at += size + 2;
        }
    } else {
        let len = body + length.unwrap_or(0);
        if buf.len() < len {
            return Parsed::Incomplete;
        }
        len
    };
    Parsed::Done {
        status,
        header,
        len,
        close,
    }
}

const TIMER_KEY: u64 = u64::MAX;

/// Thin safe wrappers over the few system calls the loop needs.
mod sys {
    use std::io;

    pub fn check(rc: i32) -> io::Result<i32> {
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc)
        }
    }

    pub struct Epoll(pub i32);

    impl Epoll {
        pub fn new() -> io::Result<Epoll> {
            // SAFETY: epoll_create1 takes flags only.
            Ok(Epoll(check(unsafe {
                libc::epoll_create1(libc::EPOLL_CLOEXEC)
            })?))
        }

        pub fn ctl(&self, op: i32, fd: i32, events: u32, key: u64) -> io::Result<()> {
            let mut ev = libc::epoll_event { events, u64: key };
            // SAFETY: `ev` is a valid event for the duration of the call.
            check(unsafe { libc::epoll_ctl(self.0, op, fd, &mut ev) }).map(|_| ())
        }

        pub fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> io::Result<usize> {
            // SAFETY: `events` has room for `events.len()` entries.
            let n = unsafe {
                libc::epoll_wait(self.0, events.as_mut_ptr(), events.len() as i32, timeout_ms)
            };
            match check(n) {
                Ok(n) => Ok(n as usize),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
                Err(e) => Err(e),
            }
        }
    }

    impl Drop for Epoll {
        fn drop(&mut self) {
            // SAFETY: the descriptor is ours and closed once.
            unsafe { libc::close(self.0) };
        }
    }

    pub struct Timer(pub i32);

    impl Timer {
        pub fn new() -> io::Result<Timer> {
            // SAFETY: plain flags.
            let fd = check(unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            })?;
            // The default slack (50 µs) would make every wake-up that late.
            // SAFETY: prctl with an integer argument changes only this thread's slack.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64) };
            Ok(Timer(fd))
        }

        /// Arms the timer to fire `after` from now (at least 1 ns: zero would disarm it).
        pub fn arm(&self, after: std::time::Duration) -> io::Result<()> {
            let after = after.max(std::time::Duration::from_nanos(1));
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: after.as_secs() as libc::time_t,
                    tv_nsec: after.subsec_nanos() as libc::c_long,
                },
            };
            // SAFETY: `spec` is valid; the old value is not asked for.
            check(unsafe { libc::timerfd_settime(self.0, 0, &spec, std::ptr::null_mut()) })
                .map(|_| ())
        }

        pub fn drain(&self) {
            let mut buf = [0u8; 8];
            // SAFETY: reads at most 8 bytes into `buf`; a non-blocking timer with nothing to
            // read fails with EAGAIN, which is ignored.
            unsafe { libc::read(self.0, buf.as_mut_ptr().cast(), 8) };
        }
    }

    impl Drop for Timer {
        fn drop(&mut self) {
            // SAFETY: the descriptor is ours and closed once.
            unsafe { libc::close(self.0) };
        }
    }

    /// Starts a non-blocking connect.
    pub fn connect_nonblocking(addr: std::net::SocketAddr) -> io::Result<std::net::TcpStream> {
        use std::os::fd::FromRawFd;
        let std::net::SocketAddr::V4(v4) = addr else {
            return Err(io::Error::other("IPv4 addresses only"));
        };
        // SAFETY: plain arguments.
        let fd = check(unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })?;
        // SAFETY: `fd` is a socket we own from here on.
        let stream = unsafe { std::net::TcpStream::from_raw_fd(fd) };
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*v4.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: `sin` is a valid IPv4 address of the size given.
        let rc = unsafe {
            libc::connect(
                fd,
                (&sin as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINPROGRESS) {
                return Err(e);
            }
        }
        stream.set_nodelay(true)?;
        Ok(stream)
    }
}

/// Runs `plan`: sends its requests at its rate for its duration, then waits up to
/// [`Plan::drain`] for the answers in flight.
pub fn run(plan: &Plan) -> io::Result<Run> {
    run_with_marks(plan, &[], |_| {})
}

/// [`run`], calling `mark(i)` (on this thread, between two sends: keep it short, or hand it
/// to another thread) once the run reaches `marks[i]`.
pub fn run_with_marks(
    plan: &Plan,
    marks: &[Duration],
    mut mark: impl FnMut(usize),
) -> io::Result<Run> {
    assert!(plan.rate > 0.0 && !plan.requests.is_empty() && plan.max_connections > 0);
    let epoll = sys::Epoll::new()?;
    let timer = sys::Timer::new()?;
    epoll.ctl(
        libc::EPOLL_CTL_ADD,
        timer.0,
        libc::EPOLLIN as u32,
        TIMER_KEY,
    )?;
    let total = (plan.rate * plan.duration.as_secs_f64()).round() as usize;
    let interval = 1.0 / plan.rate;
    let due_at = |k: usize| Duration::from_secs_f64(k as f64 * interval);
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut idle: Vec<usize> = Vec::new();
    let mut queue: VecDeque<usize> = VecDeque::new();
    let mut run = Run::default();
    run.samples.reserve(total);
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    let mut scratch = Vec::new();
    let mut next = 0usize;
    let mut next_mark = 0usize;
    let mut open = 0usize;
    let mut outstanding = 0usize;
    let watch = plan.watch_header.as_deref();
    let start = Instant::now();
    let mut drain_until: Option<Instant> = None;

    // Puts request `sample` on connection `ci` (which is idle and connected, or connecting).
    let dispatch = |ci: usize,
                    sample: usize,
                    conns: &mut Vec<Option<Conn>>,
                    run: &mut Run,
                    scratch: &mut Vec<u8>|
     -> io::Result<()> {
        let c = conns[ci].as_mut().expect("a live connection");
        let req = run.samples[sample].request;
        plan.requests[req].write(Some(1_000_000 + sample as u64), scratch);
        c.out.clear();
        c.out.extend_from_slice(scratch);
        c.written = 0;
        c.in_flight = Some(sample);
        if !c.connecting {
            flush(c)?;
            run.samples[sample].send_lag = start.elapsed().saturating_sub(run.samples[sample].due);
        }
        Ok(())
    };

    loop {
        let now = Instant::now();
        let elapsed = now - start;
        while next_mark < marks.len() && marks[next_mark] <= elapsed {
            mark(next_mark);
            next_mark += 1;
        }
        // Every request due by now: on an idle connection, a new one, or the queue.
        while next < total && due_at(next) <= elapsed {
            let sample = run.samples.len();
            run.samples.push(Sample {
                due: due_at(next),
                send_lag: Duration::ZERO,
                latency: None,
                status: 0,
                header: None,
                request: next % plan.requests.len(),
            });
            next += 1;
            outstanding += 1;
            if let Some(ci) = idle.pop() {
                if dispatch(ci, sample, &mut conns, &mut run, &mut scratch).is_err() {
                    fail_conn(ci, &mut conns, &epoll, &mut outstanding, &mut open);
                }
            } else if open < plan.max_connections {
                match sys::connect_nonblocking(plan.addr) {
                    Ok(stream) => {
                        let ci = conns.iter().position(Option::is_none).unwrap_or_else(|| {
                            conns.push(None);
                            conns.len() - 1
                        });
                        epoll.ctl(
                            libc::EPOLL_CTL_ADD,
                            stream.as_raw_fd(),
                            (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLET) as u32,
                            ci as u64,
                        )?;
                        conns[ci] = Some(Conn {
                            stream,
                            connecting: true,
                            out: Vec::new(),
                            written: 0,
                            inbuf: Vec::with_capacity(4096),
                            in_flight: None,
                        });
                        open += 1;
                        run.connections += 1;
                        dispatch(ci, sample, &mut conns, &mut run, &mut scratch)?;
                    }
                    Err(_) => {
                        outstanding -= 1;
                    }
                }
            } else {
                queue.push_back(sample);
            }
        }
        if next >= total && drain_until.is_none() {
            drain_until = Some(Instant::now() + plan.drain);
        }
        if let Some(until) = drain_until {
            if outstanding == 0 || Instant::now() >= until {
                break;
            }
        }
        // Wait for the network, or the next due request.
        let wait = if next < total {
            due_at(next).saturating_sub(start.elapsed())
        } else {
            drain_until
                .map(|u| u.saturating_duration_since(Instant::now()))
                .unwrap_or_default()
                .min(Duration::from_millis(10))
        };
        timer.arm(wait)?;
        let n = epoll.wait(&mut events, -1)?;
        for ev in &events[..n] {
            let (key, flags) = (ev.u64, ev.events);
            if key == TIMER_KEY {
                timer.drain();
                continue;
            }
            let ci = key as usize;
            let Some(c) = conns[ci].as_mut() else {
                continue;
            };
            if flags & (libc::EPOLLERR as u32) != 0 {
                fail_conn(ci, &mut conns, &epoll, &mut outstanding, &mut open);
                continue;
            }
            if c.connecting && flags & (libc::EPOLLOUT as u32) != 0 {
                c.connecting = false;
                if let Some(sample) = c.in_flight {
                    if flush(c).is_err() {
                        fail_conn(ci, &mut conns, &epoll, &mut outstanding, &mut open);
                        continue;
                    }
                    run.samples[sample].send_lag =
                        start.elapsed().saturating_sub(run.samples[sample].due);
                }
            } else if flags & (libc::EPOLLOUT as u32) != 0
                && c.written < c.out.len()
                && flush(c).is_err()
            {
                fail_conn(ci, &mut conns, &epoll, &mut outstanding, &mut open);
                continue;
            }
            if flags & ((libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLRDHUP) as u32) == 0 {
                continue;
            }
            // Read all there is (edge-triggered).
            let mut closed = false;
            let mut buf = [0u8; 16 * 1024];
            loop {
                match c.stream.read(&mut buf) {
                    Ok(0) => {
                        closed = true;
                        break;
                    }
                    Ok(k) => c.inbuf.extend_from_slice(&buf[..k]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        closed = true;
                        break;
                    }
                }
            }
            let mut freed = false;
            match parse_response(&c.inbuf, watch) {
                Parsed::Done {
                    status,
                    header,
                    len,
                    close,
                } => {
                    let done = Instant::now();
                    c.inbuf.drain(..len);
                    if let Some(sample) = c.in_flight.take() {
                        let s = &mut run.samples[sample];
                        s.latency = Some((done - start).saturating_sub(s.due));
                        s.status = status;
                        s.header = header;
                        outstanding -= 1;
                    }
                    if close || closed {
                        fail_conn(ci, &mut conns, &epoll, &mut outstanding, &mut open);
                    } else {
                        freed = true;
                    }
                }
                Parsed::Incomplete if !closed => {}
                Parsed::Incomplete | Parsed::Bad => {
                    fail_conn(ci, &mut conns, &epoll, &mut outstanding, &mut open);
                }
            }
            if freed {
                if let Some(sample) = queue.pop_front() {
                    if dispatch(ci, sample, &mut conns, &mut run, &mut scratch).is_err() {
                        fail_conn(ci, &mut conns, &epoll, &mut outstanding, &mut open);
                    }
                } else {
                    idle.push(ci);
                }
            }
        }
        // A connection that failed leaves room for a queued request on a new one.
        while open < plan.max_connections {
            let Some(sample) = queue.pop_front() else {
                break;
            };
            let Ok(stream) = sys::connect_nonblocking(plan.addr) else {
                outstanding -= 1;
                continue;
            };
            let ci = conns.iter().position(Option::is_none).unwrap_or_else(|| {
                conns.push(None);
                conns.len() - 1
            });
            epoll.ctl(
                libc::EPOLL_CTL_ADD,
                stream.as_raw_fd(),
                (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLET) as u32,
                ci as u64,
            )?;
            conns[ci] = Some(Conn {
                stream,
                connecting: true,
                out: Vec::new(),
                written: 0,
                inbuf: Vec::with_capacity(4096),
                in_flight: None,
            });
            open += 1;
            run.connections += 1;
            dispatch(ci, sample, &mut conns, &mut run, &mut scratch)?;
        }
        idle.retain(|&ci| conns[ci].is_some());
    }
    Ok(run)
}

/// Writes what is left of the connection's request.
fn flush(c: &mut Conn) -> io::Result<()> {
    while c.written < c.out.len() {
        match c.stream.write(&c.out[c.written..]) {
            Ok(0) => return Err(io::Error::other("connection closed")),
            Ok(k) => c.written += k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Closes connection `ci`; its request in flight, if any, has no answer.
fn fail_conn(
    ci: usize,
    conns: &mut [Option<Conn>],
    epoll: &sys::Epoll,
    outstanding: &mut usize,
    open: &mut usize,
) {
    if let Some(c) = conns[ci].take() {
        let _ = epoll.ctl(libc::EPOLL_CTL_DEL, c.stream.as_raw_fd(), 0, 0);
        if c.in_flight.is_some() {
            *outstanding -= 1;
        }
        *open -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_length_and_chunked_answers() {
        let a = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-V: 7\r\n\r\nabcHTTP/1.1";
        match parse_response(a, Some("x-v")) {
            Parsed::Done {
                status,
                header,
                len,
                close,
            } => {
                assert_eq!((status, header.as_deref(), close), (200, Some("7"), false));
                assert_eq!(&a[len..], b"HTTP/1.1");
            }
            _ => panic!("not parsed"),
        }
        let c = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n-\r\n0\r\n\r\n";
        assert!(matches!(
            parse_response(c, None),
            Parsed::Done { status: 404, len, .. } if len == c.len()
        ));
        assert!(matches!(
            parse_response(&c[..c.len() - 1], None),
            Parsed::Incomplete
        ));
    }

    #[test]
    fn templates_put_the_counter_where_the_mode_says() {
        let t = read_requests_tsv(
            "S\tGET\ta.com\t/x/\t\t\nR\tHEAD\tb.com\t/y/12\tq=1\tX-A:1\x1fX-B:2\nK\tPOST\tc.com\t/z\t\t\n",
        );
        let mut out = Vec::new();
        t[0].write(Some(5), &mut out);
        assert_eq!(out, b"GET /x/5 HTTP/1.1\r\nHost: a.com\r\n\r\n");
        t[1].write(Some(5), &mut out);
        assert_eq!(
            out,
            b"GET /y/5?q=1 HTTP/1.1\r\nHost: b.com\r\nX-A: 1\r\nX-B: 2\r\n\r\n"
        );
        t[2].write(Some(5), &mut out);
        assert_eq!(out, b"POST /z?u=5 HTTP/1.1\r\nHost: c.com\r\n\r\n");
    }

    #[test]
    fn summary_percentiles_count_from_the_due_time() {
        let s = |due_ms: u64, lat_ms: Option<u64>| Sample {
            due: Duration::from_millis(due_ms),
            send_lag: Duration::ZERO,
            latency: lat_ms.map(Duration::from_millis),
            status: 200,
            header: None,
            request: 0,
        };
        let samples: Vec<Sample> = (0..100)
            .map(|i| s(i, Some(i + 1)))
            .chain([s(100, None)])
            .collect();
        let all = Summary::of(&samples, Duration::ZERO, Duration::from_secs(1));
        assert_eq!((all.count, all.errors), (101, 1));
        assert_eq!(all.p50, Duration::from_millis(50));
        assert_eq!(all.p99, Duration::from_millis(99));
        assert_eq!(all.max, Duration::from_millis(100));
        let late = Summary::of(&samples, Duration::from_millis(90), Duration::from_secs(1));
        assert_eq!(late.count, 11);
    }
}
