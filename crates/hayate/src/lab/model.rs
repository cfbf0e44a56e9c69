//! The latency model (being built).

// TEMPORARY until the model module lands (replaced at merge).
pub fn fill_sweep(
    _runs: &mut [super::results::PrimitiveRun],
    _device: Option<&super::results::DeviceResult>,
) {
}
