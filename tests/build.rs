include!("../apps/arl/build.rs");
