//! Test support for command families: one client of an in-process server (no sockets),
//! driving command lines through `dispatch`.

use crate::clock::Clock;
use crate::config::Config;
use crate::instance::session::Session;
use crate::instance::state::Shared;
use crate::protocol::Reply;
use bytes::Bytes;
use std::sync::Arc;

pub struct Client {
    pub srv: Arc<Shared>,
    pub sess: Session,
}

impl Default for Client {
    fn default() -> Self {
        Client::new()
    }
}

impl Client {
    pub fn new() -> Client {
        Client::on(Arc::new(crate::cmd::new_shared(
            Config::default(),
            Clock::system(),
        )))
    }

    /// A client whose keyspace journals its changes (as the durable engine's does), and the
    /// journal, for tests of what commands record.
    pub fn durable() -> (Client, Arc<crate::engine::journal::Journal>) {
        let c = Client::new();
        let j = Arc::new(crate::engine::journal::Journal::new());
        assert!(c.srv.ks.set_journal(j.clone()));
        (c, j)
    }

    /// Another client of the same server.
    pub fn on(srv: Arc<Shared>) -> Client {
        let addr = "127.0.0.1:1".parse().expect("addr");
        let handle = srv.clients.register(addr, addr, 0);
        Client {
            sess: Session::new(handle, true),
            srv,
        }
    }

    /// Runs a command given as raw arguments.
    pub fn run(&mut self, args: &[&[u8]]) -> Reply {
        let args = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        crate::cmd::dispatch(&self.srv, &mut self.sess, args)
    }

    /// Runs a command line split on single spaces.
    pub fn line(&mut self, line: &str) -> Reply {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.run(&args)
    }

    /// A command whose reply is an array of bulk strings.
    pub fn bulks(&mut self, line: &str) -> Vec<Bytes> {
        match self.line(line) {
            Reply::Array(v) => v
                .into_iter()
                .map(|r| match r {
                    Reply::Bulk(b) => b,
                    other => panic!("not a bulk: {other:?}"),
                })
                .collect(),
            other => panic!("not an array: {other:?}"),
        }
    }

    /// `OBJECT ENCODING key`.
    pub fn encoding(&mut self, key: &str) -> String {
        match self.line(&format!("OBJECT ENCODING {key}")) {
            Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
            other => panic!("no encoding: {other:?}"),
        }
    }
}
