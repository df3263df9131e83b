//! A rank's windows, by name and id.

use super::{ChangeBoard, ForeignMemory, Window};
use crate::error::{AccessError, ConfigError};
use pld_proto::v1::WindowSpec;
use std::sync::Arc;

/// A rank's windows, sorted by name; a window's id is its index.
#[derive(Debug)]
pub struct Windows {
    list: Vec<Window>,
    board: Arc<ChangeBoard>,
}

impl Windows {
    /// Allocates the windows (sorted by name).
    pub fn new(specs: &[(String, u64)]) -> Result<Windows, ConfigError> {
        Self::with_lent(specs, &[])
    }

    /// Allocates the windows of `specs` and adds those over `lent` memory
    /// (sorted by name together).
    pub fn with_lent(
        specs: &[(String, u64)],
        lent: &[Arc<ForeignMemory>],
    ) -> Result<Windows, ConfigError> {
        let board = Arc::new(ChangeBoard::default());
        let mut list = specs
            .iter()
            .map(|(n, s)| Window::with_board(n, *s, board.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        list.extend(lent.iter().map(|m| Window::lent(m, board.clone())));
        list.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Windows { list, board })
    }

    /// What wakes waiters when any of these windows changes.
    pub fn board(&self) -> &ChangeBoard {
        &self.board
    }

    /// The window with id `id`.
    pub fn get(&self, id: u32) -> Result<&Window, AccessError> {
        self.list
            .get(id as usize)
            .ok_or(AccessError::UnknownWindow {
                id,
                count: self.list.len(),
            })
    }

    /// The id of the window called `name`.
    pub fn id_of(&self, name: &str) -> Option<u32> {
        self.list
            .binary_search_by(|w| w.name.as_str().cmp(name))
            .ok()
            .map(|i| i as u32)
    }

    /// The windows, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Window> {
        self.list.iter()
    }

    /// The names, comma-separated, for messages.
    pub fn names(&self) -> String {
        self.list
            .iter()
            .map(|w| format!("'{}'", w.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The specs as they go into a handshake.
    pub fn specs(&self) -> Vec<WindowSpec> {
        self.list
            .iter()
            .map(|w| WindowSpec {
                name: w.name.clone(),
                size: w.size(),
            })
            .collect()
    }
}
