//! Names, types and values: the schema a route is checked against (`names.rs`), the values of
//! the language (`value.rs`, and `value_text.rs`: a value from its text), the semantic checks (`validate.rs`), and one request's values and
//! result (`context.rs`).
//!
//! Invariants: a request never registers a name (only routes do); a `FieldId` is never handed
//! out twice; a context keeps its buffers across requests.

pub(crate) mod context;
pub(crate) mod names;
pub(crate) mod validate;
pub(crate) mod value;
mod value_text;

pub use context::{CaptureKey, Context, MatchResult, MatchedValue};
pub use names::{FieldId, IdState, Schema};
pub use value::{IpCidr, Type, Value};
pub use value_text::ValueTextError;
