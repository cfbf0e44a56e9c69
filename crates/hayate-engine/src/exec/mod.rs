//! Services for transactions that run many per thread (fibers, `crate::fiber`): the log
//! flusher (`flusher`) makes commits durable on its own thread, so a fiber waiting for its
//! commit suspends while the others run and the commits in flight share one fdatasync.

pub mod flusher;
