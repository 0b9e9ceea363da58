//! Views in the catalog: creating, modifying and dropping their records.
//!
//! A view is one catalog record (`'W' db 0x00 name`, [`ViewMeta`]) and no data. View DDL is
//! serialized with every other DDL by the store's DDL lock, writes its record durably in one
//! catalog transaction, and swaps the in-memory catalog after it commits, so a view appears
//! and disappears atomically and survives restarts. Names are unique among a database's
//! collections and views: creating either checks the other (a collection created inside a
//! session transaction reads the view key, so a concurrent view creation makes it conflict).
//!
//! Creating, modifying and dropping a view are recorded in the change log (`create` and
//! `modify` with the definition as their description, `dropView`), which change streams
//! show as expanded events.
//!
//! What a view may read (its pipeline, cycles, depth) is the server's business; this module
//! only stores definitions.

use bson::RawArrayBuf;

use crate::catalog::{ViewMeta, collection_key, view_key};
use crate::changelog::Change;
use crate::engine::CATALOG_SPACE;
use crate::error::{Result, StorageError};
use crate::namespace;
use crate::store::{Store, WriteTxn};

fn poisoned() -> StorageError {
    StorageError::Engine(crate::engine::EngineError::Io("lock poisoned".into()))
}

impl Store {
    /// A view's definition, if it exists (committed catalog).
    pub fn view(&self, db: &str, name: &str) -> Option<std::sync::Arc<ViewMeta>> {
        self.catalog().view(db, name).cloned()
    }

    /// Creates a view. Returns false when an identical view already exists (MongoDB 7.0
    /// treats that as success); an existing collection, or a view with another definition, is
    /// NamespaceExists.
    pub fn create_view(
        &self,
        db: &str,
        name: &str,
        view_on: &str,
        pipeline: &RawArrayBuf,
    ) -> Result<bool> {
        namespace::check_collection_for_create(db, name)?;
        let _ddl = self.ddl.lock().map_err(|_| poisoned())?;
        let cat = self.catalog();
        if let Some(v) = cat.view(db, name) {
            if v.view_on == view_on && v.pipeline.as_bytes() == pipeline.as_bytes() {
                return Ok(false);
            }
            return Err(StorageError::NamespaceExists(format!("{db}.{name}")));
        }
        if cat.get(db, name).is_some() {
            return Err(StorageError::NamespaceExists(format!("{db}.{name}")));
        }
        let view = ViewMeta {
            db: db.to_string(),
            name: name.to_string(),
            view_on: view_on.to_string(),
            pipeline: pipeline.clone(),
            created: bson::DateTime::now(),
        };
        let change = Change::on_ns("create", &view.namespace()).with("desc", view.description());
        self.ddl_tx_logged(vec![change], |tx| {
            // A collection created by an uncommitted session transaction conflicts here.
            if tx.get(CATALOG_SPACE, &collection_key(db, name))?.is_some() {
                return Err(StorageError::NamespaceExists(format!("{db}.{name}")));
            }
            tx.put(
                CATALOG_SPACE,
                &view_key(db, name),
                view.to_bson().as_bytes(),
            )?;
            Ok(())
        })?;
        self.swap_catalog(self.catalog().with_view(view))?;
        Ok(true)
    }

    /// Replaces a view's definition (`collMod`); NamespaceNotFound when it is not a view.
    pub fn modify_view(
        &self,
        db: &str,
        name: &str,
        view_on: &str,
        pipeline: &RawArrayBuf,
    ) -> Result<()> {
        let _ddl = self.ddl.lock().map_err(|_| poisoned())?;
        let Some(old) = self.catalog().view(db, name).cloned() else {
            return Err(StorageError::NamespaceNotFound(format!(
                "ns does not exist: {db}.{name}"
            )));
        };
        let view = ViewMeta {
            view_on: view_on.to_string(),
            pipeline: pipeline.clone(),
            ..(*old).clone()
        };
        let change = Change::on_ns("modify", &view.namespace()).with("desc", view.description());
        self.ddl_tx_logged(vec![change], |tx| {
            tx.put(
                CATALOG_SPACE,
                &view_key(db, name),
                view.to_bson().as_bytes(),
            )?;
            Ok(())
        })?;
        self.swap_catalog(self.catalog().with_view(view))?;
        Ok(())
    }

    /// Drops a view; false when there is none.
    pub fn drop_view(&self, db: &str, name: &str) -> Result<bool> {
        let _ddl = self.ddl.lock().map_err(|_| poisoned())?;
        if self.catalog().view(db, name).is_none() {
            return Ok(false);
        }
        let change = Change::on_ns("dropView", &format!("{db}.{name}"));
        self.ddl_tx_logged(vec![change], |tx| {
            tx.delete(CATALOG_SPACE, &view_key(db, name))?;
            Ok(())
        })?;
        self.swap_catalog(self.catalog().without_view(db, name))?;
        Ok(true)
    }

    /// Drops every view of `db` (dropping `db.system.views`); returns how many there were.
    pub fn drop_views(&self, db: &str) -> Result<usize> {
        let _ddl = self.ddl.lock().map_err(|_| poisoned())?;
        let cat = self.catalog();
        let names: Vec<String> = cat.views_in(db).map(|v| v.name.clone()).collect();
        if names.is_empty() {
            return Ok(0);
        }
        let changes = names
            .iter()
            .map(|n| Change::on_ns("dropView", &format!("{db}.{n}")))
            .collect();
        self.ddl_tx_logged(changes, |tx| {
            for n in &names {
                tx.delete(CATALOG_SPACE, &view_key(db, n))?;
            }
            Ok(())
        })?;
        let mut next = (*self.catalog()).clone();
        for n in &names {
            next = next.without_view(db, n);
        }
        self.swap_catalog(next)?;
        Ok(names.len())
    }
}

impl WriteTxn<'_> {
    /// A view's definition as of this transaction (reading its record joins the transaction's
    /// conflict checks).
    pub fn view(&self, db: &str, name: &str) -> Result<Option<std::sync::Arc<ViewMeta>>> {
        let Some(record) = self.tx.get(CATALOG_SPACE, &view_key(db, name))? else {
            return Ok(None);
        };
        if let Some(v) = self.store.catalog().view(db, name)
            && v.to_bson().as_bytes() == &*record
        {
            return Ok(Some(v.clone()));
        }
        Ok(Some(std::sync::Arc::new(ViewMeta::from_bson(&record)?)))
    }

    /// The views of `db` in name order. Views are never created or dropped inside a session
    /// transaction, so these are the committed catalog's.
    pub fn views_in(&self, db: &str) -> Vec<std::sync::Arc<ViewMeta>> {
        self.store.catalog().views_in(db).cloned().collect()
    }
}
