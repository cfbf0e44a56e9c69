//! The wire protocol by hand, for tests that look at messages a client library hides.

use std::io::Read;
use std::net::TcpStream;

/// A startup message for user "tester", database "test", protocol 3.0.
pub fn startup_message() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&196608u32.to_be_bytes()); // protocol 3.0
    for part in ["user", "tester", "database", "test", ""] {
        body.extend_from_slice(part.as_bytes());
        body.push(0);
    }
    let mut message = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    message.extend_from_slice(&body);
    message
}

/// One frontend message: type byte, length, body.
pub fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// The SQLSTATE of every ErrorResponse the server sends until the ReadyForQuery that ends
/// `count` Syncs, and the number of DataRows.
pub fn read_until_ready(stream: &mut TcpStream, count: usize) -> (Vec<String>, usize) {
    let mut statuses = Vec::new();
    read_messages(stream, count, &mut statuses)
}

/// `read_until_ready`, also collecting every ParameterStatus (name, value) into `statuses`.
pub fn read_messages(
    stream: &mut TcpStream,
    count: usize,
    statuses: &mut Vec<(String, String)>,
) -> (Vec<String>, usize) {
    let (mut errors, mut rows, mut ready) = (Vec::new(), 0, 0);
    while ready < count {
        let mut header = [0u8; 5];
        stream.read_exact(&mut header).expect("a message");
        let length = u32::from_be_bytes(header[1..5].try_into().unwrap()) as usize;
        let mut body = vec![0u8; length - 4];
        stream.read_exact(&mut body).unwrap();
        match header[0] {
            b'E' => {
                let code = (body.split(|byte| *byte == 0))
                    .find(|field| field.first() == Some(&b'C'))
                    .map(|field| String::from_utf8_lossy(&field[1..]).into_owned());
                errors.push(code.unwrap_or_default());
            }
            b'D' => rows += 1,
            b'S' => {
                let mut fields = body.split(|byte| *byte == 0).map(String::from_utf8_lossy);
                let name = fields.next().unwrap_or_default().into_owned();
                statuses.push((name, fields.next().unwrap_or_default().into_owned()));
            }
            b'Z' => ready += 1,
            _ => {}
        }
    }
    (errors, rows)
}
