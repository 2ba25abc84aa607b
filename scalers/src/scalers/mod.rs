//! The built-in scalers, one module per source.

pub mod resource;

use crate::registry::{Declared, Registry};

/// Registers every built-in trigger type. Keep the list sorted by type.
pub(crate) fn register_builtin(registry: &mut Registry) {
    registry.register("cpu", Declared::new(resource::build_cpu, resource::PARAMS));
    registry.register(
        "memory",
        Declared::new(resource::build_memory, resource::PARAMS),
    );
}
