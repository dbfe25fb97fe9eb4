//! PLACEHOLDER until the rdb-stream branch lands (it owns this file and replaces it):
//! streams cannot be dumped or restored yet. `save` writes nothing and `load` refuses.

use super::{Bad, Reader, Writer};
use crate::types::stream::Stream;

/// Type 19 body of a stream (placeholder: writes nothing).
pub fn save(_s: &Stream, _w: &mut Writer) {}

/// Loads a stream of RDB type 15, 19 or 21 (placeholder: always refuses).
pub fn load(_r: &mut Reader, _rdb_type: u8) -> Result<Stream, Bad> {
    Err(Bad)
}
