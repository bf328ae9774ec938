pub mod lattice;
pub mod trainer;
