//! Names and types: the rule for field names (`field_name.rs`), the schema a route is checked
//! against (`names.rs`), the semantic checks (`validate.rs`), one request's values by field
//! (`values.rs`), and a typed value read from its text (`value_text.rs`). The values themselves
//! are a leaf below the language (`crate::value`).
//!
//! Invariants: a request never registers a name (only routes do); a `FieldId` is never handed
//! out twice; request values keep their buffers across requests.

pub(crate) mod field_name;
pub(crate) mod names;
pub(crate) mod validate;
mod value_text;
pub(crate) mod values;

pub use field_name::{check_declared_name, check_field_name, NameRule};
pub use names::{FieldId, FieldMask, IdState, Schema};
pub use value_text::ValueTextError;
