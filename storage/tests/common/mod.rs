//! Helpers shared by the storage integration tests.

use std::path::Path;

/// Copies the directory tree `from` into `to` (a fixture data directory into a temporary one,
/// so tests never open the checked-in copy).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// The catalog format version recorded in `store` (catalog key `V`).
pub fn catalog_version(store: &cairn_storage::Store) -> u32 {
    let v = store
        .read()
        .unwrap()
        .snapshot()
        .get(cairn_storage::engine::CATALOG_SPACE, b"V")
        .unwrap()
        .unwrap();
    u32::from_be_bytes(v[..].try_into().unwrap())
}
