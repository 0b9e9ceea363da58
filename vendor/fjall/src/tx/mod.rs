// Copyright (c) 2024-present, fjall-rs
// This source code is licensed under both the Apache 2.0 and MIT License
// (found in the LICENSE-* files in the repository)

pub mod optimistic;
pub mod single_writer;
mod write_buffer;
pub mod write_tx;
