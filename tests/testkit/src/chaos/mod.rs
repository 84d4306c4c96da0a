//! Shared by the chaos soak's programs (`src/bin/chaos.rs`, `chaos-resource.rs`,
//! `chaos-contender.rs`): the lock paths every contender uses, and the seeded random numbers that
//! make a soak's fault plan and each contender's choices replayable from one seed; [`entitlement`],
//! who had the right to hold by the server's record, for the resource's judge.

pub mod census;
pub mod entitlement;

/// The mutex every contender (Curator's `InterProcessMutex` too) contends for.
pub const MUTEX_PATH: &str = "/chaos/mutex";
/// The read/write lock of the zklock contenders.
pub const RW_PATH: &str = "/chaos/rw";
/// The counting semaphore of the Rust contenders (zklock's, Curator's InterProcessSemaphoreV2
/// layout), and its max: at most this many of its leases held at once.
pub const SEMAPHORE_PATH: &str = "/chaos/semaphore";
pub const SEMAPHORE_MAX: u32 = 3;

/// The soak's ensemble requires SASL (unless `--sasl off`): the DIGEST-MD5 user every contender
/// authenticates as (`--sasl-digest USER:PASSWORD`), whatever its language or client.
pub const SASL_CONTENDER: (&str, &str) = ("contender", "contender-sasl-pw");
/// ... and the one of the soak's own plain client (the census and the operator's deletes).
pub const SASL_OPERATOR: (&str, &str) = ("operator", "operator-sasl-pw");

/// splitmix64: tiny, fast, and good enough to drive choices; the same seed gives the same sequence.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0; the modulo bias is irrelevant at these sizes).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A seed for the `incarnation`-th process of contender slot `slot`, derived from the soak's seed,
/// so a replay gives every contender the same seeds. Below 2^53, so that every language reads it
/// exactly (a JavaScript number, a Java `long`).
pub fn contender_seed(soak_seed: u64, slot: usize, incarnation: u32) -> u64 {
    let mut rng = SplitMix64::new(soak_seed ^ ((slot as u64) << 32) ^ u64::from(incarnation).rotate_left(17));
    rng.next_u64();
    rng.next_u64() & ((1 << 53) - 1)
}
