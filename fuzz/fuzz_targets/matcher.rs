//! Structured differential target: a small schema, route tables built by arbitrary add and
//! remove sequences (expressions generated from arbitrary choices, mostly valid), and requests.
//! After every step the router must hold exactly what a model says, in routing order, and the
//! indexed matcher (`Router::execute`) must give what the reference evaluator
//! (`Router::execute_reference`) gives on every request: matched or not, route id, priority,
//! matched values and captures, in order. See `atc_router_fuzz::structured`.
#![no_main]

use atc_router_fuzz::structured::Scenario;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|scenario: Scenario| {
    scenario.run();
});
