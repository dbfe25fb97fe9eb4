#![no_main]
//! Calls `respite::fuzzing::resp_parse`; the corpus replays on stable in tests/fuzz_corpus.rs.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| respite::fuzzing::resp_parse(data));
