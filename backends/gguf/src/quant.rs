//! ggml's tensor types and their dequantization to f32, block by block, as llama.cpp's
//! reference `dequantize_row_*` functions (`ggml-quants.c`) compute them. Checked
//! element for element against gguf-py's `gguf.quants.dequantize` (the reference HF
//! transformers itself loads GGUF files with) in `tests/fixtures/gguf/quants.*`.

use half::{bf16, f16};

/// A ggml tensor type this crate can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GgmlType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
}

const QK: usize = 32;
const QK_K: usize = 256;

impl GgmlType {
    pub const SUPPORTED: &'static str = "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K";

    /// The type of a ggml type id (`enum ggml_type`).
    pub fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            6 => Self::Q5_0,
            7 => Self::Q5_1,
            8 => Self::Q8_0,
            10 => Self::Q2K,
            11 => Self::Q3K,
            12 => Self::Q4K,
            13 => Self::Q5K,
            14 => Self::Q6K,
            30 => Self::BF16,
            _ => return None,
        })
    }

    pub fn id(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q4_1 => 3,
            Self::Q5_0 => 6,
            Self::Q5_1 => 7,
            Self::Q8_0 => 8,
            Self::Q2K => 10,
            Self::Q3K => 11,
            Self::Q4K => 12,
            Self::Q5K => 13,
            Self::Q6K => 14,
            Self::BF16 => 30,
        }
    }

    /// Elements per block.
    pub fn block_elements(self) -> usize {
        match self {
            Self::F32 | Self::F16 | Self::BF16 => 1,
            Self::Q4_0 | Self::Q4_1 | Self::Q5_0 | Self::Q5_1 | Self::Q8_0 => QK,
            Self::Q2K | Self::Q3K | Self::Q4K | Self::Q5K | Self::Q6K => QK_K,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F16 | Self::BF16 => 2,
            Self::Q4_0 => 2 + QK / 2,
            Self::Q4_1 => 4 + QK / 2,
            Self::Q5_0 => 2 + 4 + QK / 2,
            Self::Q5_1 => 4 + 4 + QK / 2,
            Self::Q8_0 => 2 + QK,
            Self::Q2K => QK_K / 16 + QK_K / 4 + 4,
            Self::Q3K => QK_K / 8 + QK_K / 4 + 12 + 2,
            Self::Q4K => 4 + 12 + QK_K / 2,
            Self::Q5K => 4 + 12 + QK_K / 8 + QK_K / 2,
            Self::Q6K => QK_K / 2 + QK_K / 4 + QK_K / 16 + 2,
        }
    }

    /// Bytes of `n` elements, or `None` when `n` is not a whole number of blocks.
    pub fn n_bytes(self, n: u64) -> Option<u64> {
        let per = self.block_elements() as u64;
        n.is_multiple_of(per).then(|| n / per * self.block_bytes() as u64)
    }

    /// `n` elements from `bytes` (exactly [`Self::n_bytes`] of them).
    pub fn dequantize(self, bytes: &[u8], n: usize) -> Vec<f32> {
        assert_eq!(Some(bytes.len() as u64), self.n_bytes(n as u64), "{self:?}: {} bytes for {n} elements", bytes.len());
        let mut out = vec![0f32; n];
        let (be, bb) = (self.block_elements(), self.block_bytes());
        let block: fn(&[u8], &mut [f32]) = match self {
            Self::F32 => |b, y| y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            Self::F16 => |b, y| y[0] = half(b, 0),
            Self::BF16 => |b, y| y[0] = bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32(),
            Self::Q4_0 => q4_0,
            Self::Q4_1 => q4_1,
            Self::Q5_0 => q5_0,
            Self::Q5_1 => q5_1,
            Self::Q8_0 => q8_0,
            Self::Q2K => q2_k,
            Self::Q3K => q3_k,
            Self::Q4K => q4_k,
            Self::Q5K => q5_k,
            Self::Q6K => q6_k,
        };
        for (b, y) in bytes.chunks_exact(bb).zip(out.chunks_exact_mut(be)) {
            block(b, y);
        }
        out
    }
}

/// The f16 at byte `at`.
fn half(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

fn q4_0(b: &[u8], y: &mut [f32]) {
    let d = half(b, 0);
    let qs = &b[2..];
    for j in 0..QK / 2 {
        y[j] = ((qs[j] & 0x0F) as i32 - 8) as f32 * d;
        y[j + QK / 2] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
    }
}

fn q4_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (half(b, 0), half(b, 2));
    let qs = &b[4..];
    for j in 0..QK / 2 {
        y[j] = (qs[j] & 0x0F) as f32 * d + m;
        y[j + QK / 2] = (qs[j] >> 4) as f32 * d + m;
    }
}

fn q5_0(b: &[u8], y: &mut [f32]) {
    let d = half(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..];
    for j in 0..QK / 2 {
        let xh0 = (((qh >> j) << 4) & 0x10) as u8;
        let xh1 = ((qh >> (j + 12)) & 0x10) as u8;
        y[j] = (((qs[j] & 0x0F) | xh0) as i32 - 16) as f32 * d;
        y[j + QK / 2] = (((qs[j] >> 4) | xh1) as i32 - 16) as f32 * d;
    }
}

fn q5_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (half(b, 0), half(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let qs = &b[8..];
    for j in 0..QK / 2 {
        let xh0 = (((qh >> j) << 4) & 0x10) as u8;
        let xh1 = ((qh >> (j + 12)) & 0x10) as u8;
        y[j] = ((qs[j] & 0x0F) | xh0) as f32 * d + m;
        y[j + QK / 2] = ((qs[j] >> 4) | xh1) as f32 * d + m;
    }
}

fn q8_0(b: &[u8], y: &mut [f32]) {
    let d = half(b, 0);
    for (j, &q) in b[2..].iter().enumerate() {
        y[j] = q as i8 as f32 * d;
    }
}

/// Scale and min of sub-block `j` from the 12 packed bytes of Q4_K/Q5_K (`get_scale_min_k4`).
fn scale_min_k4(j: usize, q: &[u8]) -> (f32, f32) {
    let (d, m) =
        if j < 4 { (q[j] & 63, q[j + 4] & 63) } else { ((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)) };
    (d as f32, m as f32)
}

fn q2_k(b: &[u8], y: &mut [f32]) {
    let scales = &b[..16];
    let qs = &b[16..80];
    let (d, min) = (half(b, 80), half(b, 82));
    let mut out = 0;
    let mut is = 0;
    for n in (0..QK_K).step_by(128) {
        let q = &qs[n / 4..];
        for shift in (0..8).step_by(2) {
            for half_block in 0..2 {
                let sc = scales[is];
                is += 1;
                let (dl, ml) = (d * (sc & 0x0F) as f32, min * (sc >> 4) as f32);
                for l in 0..16 {
                    y[out] = dl * ((q[l + 16 * half_block] >> shift) & 3) as f32 - ml;
                    out += 1;
                }
            }
        }
    }
}

fn q3_k(b: &[u8], y: &mut [f32]) {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let hmask = &b[..32];
    let qs = &b[32..96];
    let raw = &b[96..108];
    let d_all = half(b, 108);
    let word = |i: usize| u32::from_le_bytes([raw[4 * i], raw[4 * i + 1], raw[4 * i + 2], raw[4 * i + 3]]);
    let (a0, a1, tmp) = (word(0), word(1), word(2));
    let aux = [
        (a0 & KMASK2) | ((tmp & KMASK1) << 4),
        (a1 & KMASK2) | (((tmp >> 2) & KMASK1) << 4),
        ((a0 >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4),
        ((a1 >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4),
    ];
    let scales: Vec<i8> = aux.iter().flat_map(|w| w.to_le_bytes()).map(|v| v as i8).collect();
    let mut out = 0;
    let mut is = 0;
    let mut m = 1u8;
    for n in (0..QK_K).step_by(128) {
        let q = &qs[n / 4..];
        for shift in (0..8).step_by(2) {
            for half_block in 0..2 {
                let dl = d_all * (scales[is] as i32 - 32) as f32;
                is += 1;
                for l in 0..16 {
                    let i = l + 16 * half_block;
                    let high = if hmask[i] & m != 0 { 0 } else { 4 };
                    y[out] = dl * (((q[i] >> shift) & 3) as i32 - high) as f32;
                    out += 1;
                }
            }
            m <<= 1;
        }
    }
}

fn q4_k(b: &[u8], y: &mut [f32]) {
    let (d, min) = (half(b, 0), half(b, 2));
    let scales = &b[4..16];
    let qs = &b[16..];
    for (k, j) in (0..QK_K).step_by(64).enumerate() {
        let q = &qs[32 * k..32 * k + 32];
        let (sc1, m1) = scale_min_k4(2 * k, scales);
        let (sc2, m2) = scale_min_k4(2 * k + 1, scales);
        let (d1, m1, d2, m2) = (d * sc1, min * m1, d * sc2, min * m2);
        for l in 0..32 {
            y[j + l] = d1 * (q[l] & 0x0F) as f32 - m1;
            y[j + 32 + l] = d2 * (q[l] >> 4) as f32 - m2;
        }
    }
}

fn q5_k(b: &[u8], y: &mut [f32]) {
    let (d, min) = (half(b, 0), half(b, 2));
    let scales = &b[4..16];
    let qh = &b[16..48];
    let ql = &b[48..];
    let (mut u1, mut u2) = (1u8, 2u8);
    for (k, j) in (0..QK_K).step_by(64).enumerate() {
        let q = &ql[32 * k..32 * k + 32];
        let (sc1, m1) = scale_min_k4(2 * k, scales);
        let (sc2, m2) = scale_min_k4(2 * k + 1, scales);
        let (d1, m1, d2, m2) = (d * sc1, min * m1, d * sc2, min * m2);
        for l in 0..32 {
            let h1 = if qh[l] & u1 != 0 { 16 } else { 0 };
            let h2 = if qh[l] & u2 != 0 { 16 } else { 0 };
            y[j + l] = d1 * ((q[l] & 0x0F) + h1) as f32 - m1;
            y[j + 32 + l] = d2 * ((q[l] >> 4) + h2) as f32 - m2;
        }
        u1 <<= 2;
        u2 <<= 2;
    }
}

fn q6_k(b: &[u8], y: &mut [f32]) {
    let ql_all = &b[..128];
    let qh_all = &b[128..192];
    let sc_all = &b[192..208];
    let d = half(b, 208);
    for (k, n) in (0..QK_K).step_by(128).enumerate() {
        let (ql, qh, sc) = (&ql_all[64 * k..], &qh_all[32 * k..], &sc_all[8 * k..]);
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i32 - 32;
            let q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
            let s = |i: usize| sc[is + i] as i8 as f32;
            y[n + l] = d * s(0) * q1 as f32;
            y[n + l + 32] = d * s(2) * q2 as f32;
            y[n + l + 64] = d * s(4) * q3 as f32;
            y[n + l + 96] = d * s(6) * q4 as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_sizes_are_ggmls() {
        // ggml's type_traits: (blck_size, type_size).
        let expected = [
            (GgmlType::Q4_0, 32, 18),
            (GgmlType::Q4_1, 32, 20),
            (GgmlType::Q5_0, 32, 22),
            (GgmlType::Q5_1, 32, 24),
            (GgmlType::Q8_0, 32, 34),
            (GgmlType::Q2K, 256, 84),
            (GgmlType::Q3K, 256, 110),
            (GgmlType::Q4K, 256, 144),
            (GgmlType::Q5K, 256, 176),
            (GgmlType::Q6K, 256, 210),
        ];
        for (ty, elements, bytes) in expected {
            assert_eq!((ty.block_elements(), ty.block_bytes()), (elements, bytes), "{ty:?}");
            assert_eq!(GgmlType::from_id(ty.id()), Some(ty));
        }
    }

    #[test]
    fn q8_0_by_hand() {
        // d = 0.5 (f16 0x3800), q = 0..32 as i8, with one negative.
        let mut block = vec![0x00, 0x38];
        block.extend((0..32).map(|i| if i == 3 { -4i8 as u8 } else { i as u8 }));
        let y = GgmlType::Q8_0.dequantize(&block, 32);
        assert_eq!(y[1], 0.5);
        assert_eq!(y[3], -2.0);
        assert_eq!(y[31], 15.5);
    }

    /// Every type against gguf-py's `gguf.quants.dequantize` on random blocks
    /// (scripts/fixtures/make_gguf_fixtures.py).
    #[test]
    fn dequantize_equals_gguf_py() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf/quants.safetensors");
        let bytes = std::fs::read(&path).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let names = [
            ("F16", GgmlType::F16),
            ("BF16", GgmlType::BF16),
            ("Q4_0", GgmlType::Q4_0),
            ("Q4_1", GgmlType::Q4_1),
            ("Q5_0", GgmlType::Q5_0),
            ("Q5_1", GgmlType::Q5_1),
            ("Q8_0", GgmlType::Q8_0),
            ("Q2_K", GgmlType::Q2K),
            ("Q3_K", GgmlType::Q3K),
            ("Q4_K", GgmlType::Q4K),
            ("Q5_K", GgmlType::Q5K),
            ("Q6_K", GgmlType::Q6K),
        ];
        assert_eq!(st.names().len(), 2 * names.len(), "a type in the fixture is not checked here");
        for (name, ty) in names {
            let raw = st.tensor(&format!("{name}.raw")).unwrap();
            let expected: Vec<f32> = st
                .tensor(&format!("{name}.f32"))
                .unwrap()
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            let got = ty.dequantize(raw.data(), expected.len());
            assert_eq!(got.len(), expected.len(), "{name}");
            let worst = got.iter().zip(&expected).map(|(a, b)| (a - b).abs() / b.abs().max(1e-3)).fold(0f32, f32::max);
            assert!(worst <= 1e-6, "{name}: worst relative difference {worst}");
        }
    }

    #[test]
    fn a_partial_block_is_not_a_size() {
        assert_eq!(GgmlType::Q4K.n_bytes(255), None);
        assert_eq!(GgmlType::Q4K.n_bytes(512), Some(288));
    }
}
