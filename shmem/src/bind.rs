//! Binding a PE's program thread to one core (`PLD_BIND=core`, which
//! pld-oshrun sets by default), as `mpirun` binds its ranks.

/// Binds the calling thread (the program's: the runtime's threads were
/// started before and stay free) to the `i`-th, modulo their number, of
/// the cores this process may run on.
pub(crate) fn to_core(i: usize) -> std::io::Result<()> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a zeroed cpu_set_t is the empty set; the calls read or
    // write exactly `size` bytes of it.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size, &mut allowed) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|c| libc::CPU_ISSET(*c, &allowed))
            .collect();
        let Some(cpu) = cpus.get(i % cpus.len().max(1)) else {
            return Ok(());
        };
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(*cpu, &mut one);
        if libc::sched_setaffinity(0, size, &one) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
