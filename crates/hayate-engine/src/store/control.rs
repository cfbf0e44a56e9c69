//! (control file, coming)
