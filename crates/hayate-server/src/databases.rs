//! The databases the server's connections reach: the cluster's catalogs, kept open while
//! the server runs so a database is not opened again for every connection
//! (`hayate_sql::Cluster` closes a catalog when its last session ends).

use std::collections::HashMap;
use std::sync::Arc;

use hayate_engine::Database;
use hayate_sql::{Catalog, Cluster, SqlResult};
use parking_lot::Mutex;

pub struct Databases {
    cluster: Arc<Cluster>,
    held: Mutex<HashMap<String, Arc<Catalog>>>,
}

impl Databases {
    pub fn new(cluster: Arc<Cluster>) -> Databases {
        Databases {
            cluster,
            held: Mutex::new(HashMap::new()),
        }
    }

    pub fn database(&self) -> &Database {
        self.cluster.database()
    }

    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// The catalog of the database `name` (3D000 if there is none).
    pub fn catalog(&self, name: &str) -> SqlResult<Arc<Catalog>> {
        if let Some(catalog) = self.held.lock().get(name) {
            if !catalog.is_dropped() {
                return Ok(catalog.clone());
            }
        }
        let opened = self.cluster.catalog(name);
        let mut held = self.held.lock();
        match &opened {
            Ok(catalog) => held.insert(name.to_string(), catalog.clone()),
            Err(_) => held.remove(name),
        };
        opened
    }
}
