//! What goes into a build and what comes out of it: the lists a caller hands a [`Builder`]
//! ([`RouteInput`]), the outcome of each version ([`Outcome`], and [`Done`] as the threads
//! leave it), where the builder is ([`BuildState`]), its lanes ([`Lane`]) and the publish hook
//! ([`Publish`]). Shared by the caller's side (`builder.rs`) and the threads'
//! (`build_worker.rs`, `build_lanes.rs`), which depend on it and never on each other's
//! internals.
//!
//! Invariant: every version submitted gets exactly one [`Outcome`]; only a built one carries a
//! table (in its [`Done`]), and what the publish hook kept travels with that table.
//!
//! [`Builder`]: super::Builder

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{RouteSpec, Router, SyncReport};
use crate::route_list::{EntryList, Position};

pub use super::entry_errors::EntryError;

/// A list as the caller hands it over.
pub enum RouteInput {
    /// A whole list, read by the caller (the C ABI's `atc_route_list`): the table wanted.
    List(EntryList),
    /// A whole list in text (TSV or JSON, see [`crate::route_list`]), read on the builder's
    /// thread: the caller decodes nothing.
    Text(Box<dyn AsRef<[u8]> + Send>),
    /// Changes to the table: routes to put in, ids to take out (see
    /// [`Router::update`](super::Router::update)).
    Changes(EntryList),
    /// A list whose last entries the caller lent instead of copying (the C ABI's
    /// `atc_route_list_lend`). What `read` reads must stay valid until the version's outcome
    /// is taken (or the builder dropped).
    Lent {
        /// The entries copied, which come first.
        list: EntryList,
        /// A list of changes, or (false) a whole list.
        changes: bool,
        /// Appends the lent entries to `list`: called on the builder's thread when the
        /// version's build starts, and never for a version superseded before that.
        read: Box<dyn FnOnce(&mut EntryList) + Send>,
    },
}

impl std::fmt::Debug for RouteInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RouteInput::List(l) => write!(f, "List({} entries)", l.len()),
            RouteInput::Text(t) => write!(f, "Text({} bytes)", t.as_ref().as_ref().len()),
            RouteInput::Changes(l) => write!(f, "Changes({} entries)", l.len()),
            RouteInput::Lent { list, changes, .. } => {
                write!(f, "Lent({} entries, changes: {changes})", list.len())
            }
        }
    }
}

impl RouteInput {
    /// A whole list of routes, copied (route `i` is entry `#i+1`).
    pub fn routes(routes: &[RouteSpec<'_>]) -> RouteInput {
        RouteInput::List(entry_list(routes))
    }

    /// Whether it is a list of changes.
    pub(super) fn is_changes(&self) -> bool {
        matches!(
            self,
            RouteInput::Changes(_) | RouteInput::Lent { changes: true, .. }
        )
    }
}

/// `routes` as an entry list (route `i` is entry `#i+1`).
pub(super) fn entry_list(routes: &[RouteSpec<'_>]) -> EntryList {
    let text = routes.iter().map(|r| r.expression.len()).sum();
    let mut list = EntryList::with_capacity(routes.len(), text);
    for (i, r) in routes.iter().enumerate() {
        list.push_route(Position::Item(i + 1), r.id, r.priority, r.expression);
    }
    list
}

/// What became of a version submitted.
#[derive(Debug)]
pub enum Outcome {
    /// Its table is in force (swapped in by [`Builder::apply_to`](super::Builder::apply_to)).
    Built {
        /// The version submitted with its list.
        version: u64,
        /// What changed from the table it replaced, and the invalid entries apply-valid left
        /// out or kept at their current version.
        report: SyncReport,
        /// See [`Outcome::build_time`].
        build_time: Duration,
        /// What the builder's publish hook made of the table, if one is set
        /// ([`Builder::publish_with`](super::Builder::publish_with)): where it published it, or why it could not.
        published: Option<Result<String, String>>,
    },
    /// The list was refused (all or nothing: some entry invalid; or a text that is not a route
    /// list at all): the current table stays.
    Refused {
        /// The version submitted with it.
        version: u64,
        /// Every invalid entry (empty when the text as a whole could not be read).
        errors: Vec<EntryError>,
        /// What was wrong, in one line: the one message of a refused list.
        message: String,
        /// See [`Outcome::build_time`].
        build_time: Duration,
    },
    /// The build panicked (a bug): the current table stays.
    Panicked {
        /// The version being built.
        version: u64,
        /// The panic's message.
        message: String,
        /// See [`Outcome::build_time`].
        build_time: Duration,
    },
    /// A whole list submitted after it, before it was started, took its place: it was never
    /// built.
    Superseded {
        /// The version.
        version: u64,
        /// The version of the whole list that took its place.
        by: u64,
    },
}

impl Outcome {
    /// The version the outcome is for.
    pub fn version(&self) -> u64 {
        match self {
            Outcome::Built { version, .. }
            | Outcome::Refused { version, .. }
            | Outcome::Panicked { version, .. }
            | Outcome::Superseded { version, .. } => *version,
        }
    }

    /// How long the builder's thread took from taking up the list to the outcome (wall clock:
    /// reading, preparing and building; not the time the list waited in the queue); zero for a
    /// version superseded. What a caller records as the update's build time
    /// ([`Router::record_update`]).
    pub fn build_time(&self) -> Duration {
        match self {
            Outcome::Built { build_time, .. }
            | Outcome::Refused { build_time, .. }
            | Outcome::Panicked { build_time, .. } => *build_time,
            Outcome::Superseded { .. } => Duration::ZERO,
        }
    }
}

/// Where the builder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildState {
    /// Nothing submitted whose outcome was not taken.
    Idle,
    /// A version is queued or being built (the newest submitted).
    Building(u64),
    /// Outcomes wait to be taken, and nothing is being built (the newest of them).
    Ready(u64),
}

/// Which of a builder's threads a start hook runs on (see [`Builder::on_thread_start`](super::Builder::on_thread_start)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// The thread that builds in the background: every build, unless one waits too long.
    Background,
    /// The thread that takes the work over once a version has waited longer than
    /// [`Builder::boost_after`](super::Builder::boost_after), at the priority of the thread that started the builder.
    Boosted,
}

/// What a builder does with every table it builds, on its thread (see
/// [`Builder::publish_with`](super::Builder::publish_with)): given the version and the table, where it published it, or why
/// it could not.
pub type Publish = Box<dyn FnMut(u64, &Router) -> Result<Published, String> + Send>;

/// Where a [`Publish`] hook put a table, and what must live for that place to stay good.
pub struct Published {
    /// Where the table was published (a path, for the C library's images).
    pub path: String,
    /// Kept for as long as the published table is the one in force, then dropped: a sealed
    /// image's descriptor, say, whose path names this very process's copy. A
    /// [`BackgroundRouter`](super::BackgroundRouter) holds it until it applies the next table;
    /// [`Builder::apply_to`](super::Builder::apply_to) drops it at once.
    pub keep: Option<Box<dyn std::any::Any + Send>>,
}

impl Published {
    /// A table published at `path`, with nothing to keep alive.
    pub fn at(path: impl Into<String>) -> Published {
        Published {
            path: path.into(),
            keep: None,
        }
    }
}

impl std::fmt::Debug for Published {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Published")
            .field("path", &self.path)
            .field("keep", &self.keep.is_some())
            .finish()
    }
}

/// What a published table in force keeps alive (see [`Published::keep`]).
pub(crate) type Keep = Box<dyn std::any::Any + Send>;

/// A [`Publish`] hook, shared by the threads a builder starts (one per process it runs in),
/// and whether the caller keeps the tables it publishes.
#[derive(Clone)]
pub(super) struct PublishHook(pub(super) Arc<Mutex<Publish>>, pub(super) bool);

impl std::fmt::Debug for PublishHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PublishHook")
    }
}

/// Longest TSV line a list in text may have: the longest expression and room for the rest.
pub(super) const LIST_LINE_SLACK: usize = 256;

/// An outcome waiting for the caller, with the table a built one swaps in.
#[derive(Debug)]
pub(super) struct Done {
    pub(super) outcome: Outcome,
    pub(super) table: Option<Box<Router>>,
    /// What the publish hook asked to keep alive with the table (see `Published::keep`).
    pub(super) keep: Option<Keep>,
}
