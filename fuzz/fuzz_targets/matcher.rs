//! Structured differential target: a case of the one generator (`atc_testkit::Case`: a schema,
//! up to 24 routes over the whole language, up to 12 requests, then up to 48 changes: adds at
//! free and held ids, removes, syncs in both modes, stale sync plans, foreign contexts; one case
//! in eight under tight limits), run by the harness the equivalence proptests use
//! (`atc_testkit::check::run`). After the routes are in and after every change, the router must
//! hold exactly what a model says, in routing order, and the indexed matcher
//! (`Router::execute`) must give what the reference evaluator (`Router::execute_reference`)
//! gives on every request: matched or not, route, priority, matched values and captures, in
//! order. A failed add must change nothing, a sync must report what the model predicts and
//! answer like a router built from scratch, a stale plan must be refused, and the wildcard
//! names registered must be exactly those the routes use.
#![no_main]

use atc_testkit::check;
use atc_testkit::Case;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|case: Case| {
    check::run(&case.render());
});
