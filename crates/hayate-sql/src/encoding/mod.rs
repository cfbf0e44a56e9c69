//! Byte encodings of SQL rows for the engine: keys that sort like the values they encode
//! (`key`), and the values of rows (`row`). Both are described in docs/design.md, "The server".

pub mod key;
pub mod row;
