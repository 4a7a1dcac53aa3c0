//! Exact decimal numbers of any size, for comparing answers: `2^64` and `2^64 + 1` differ,
//! `3.50` and `3.5` do not. A number is its sign, its significant digits and a power of ten;
//! nothing is ever rounded. Exponents are bounded (`|e| ≤` [`MAX_EXPONENT`]) so that no
//! reply can make a comparison allocate more than a few kilobytes.

use std::cmp::Ordering;

/// The largest power of ten a number may carry (`1e10000` is a number; `1e10001` is text).
pub const MAX_EXPONENT: i64 = 10_000;

/// `(-1)^neg · digits · 10^exp`, normalized: no leading or trailing zero digits, zero has
/// no digits and is never negative.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decimal {
    neg: bool,
    /// Most significant first, each 0–9.
    digits: Vec<u8>,
    exp: i64,
}

/// An optional `-` or `+` at `b[*i]`, stepped over; whether it was `-`.
fn sign(b: &[u8], i: &mut usize) -> bool {
    match b.get(*i) {
        Some(&c @ (b'-' | b'+')) => {
            *i += 1;
            c == b'-'
        }
        _ => false,
    }
}

impl Decimal {
    /// `[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?`, the whole of `s`; `None` otherwise (or when
    /// the exponent is beyond [`MAX_EXPONENT`]).
    pub fn parse(s: &str) -> Option<Decimal> {
        let b = s.as_bytes();
        let mut i = 0;
        let neg = sign(b, &mut i);
        let mut digits = Vec::new();
        let mut exp: i64 = 0;
        let int_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            digits.push(b[i] - b'0');
            i += 1;
        }
        let mut any = i > int_start;
        if i < b.len() && b[i] == b'.' {
            i += 1;
            let frac_start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                digits.push(b[i] - b'0');
                exp -= 1;
                i += 1;
            }
            any |= i > frac_start;
        }
        if !any {
            return None;
        }
        if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
            i += 1;
            let eneg = sign(b, &mut i);
            let start = i;
            let mut e: i64 = 0;
            while i < b.len() && b[i].is_ascii_digit() {
                e = e.saturating_mul(10).saturating_add((b[i] - b'0') as i64);
                i += 1;
            }
            if i == start || e > MAX_EXPONENT {
                return None;
            }
            exp += if eneg { -e } else { e };
        }
        if i != b.len() {
            return None;
        }
        Some(Decimal { neg, digits, exp }.normalized())
    }

    /// An `f64` exactly as its shortest decimal representation reads (`0.05` is `5e-2`).
    pub fn from_f64(x: f64) -> Option<Decimal> {
        if !x.is_finite() {
            return None;
        }
        Decimal::parse(&format!("{x:e}"))
    }

    fn normalized(mut self) -> Decimal {
        let lead = self.digits.iter().take_while(|&&d| d == 0).count();
        self.digits.drain(..lead);
        while self.digits.last() == Some(&0) {
            self.digits.pop();
            self.exp += 1;
        }
        if self.digits.is_empty() {
            self.exp = 0;
            self.neg = false;
        }
        self
    }

    pub fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// Plain notation, no exponent: `-1234.5`, `0.001`, `1000`, `0`.
    pub fn to_plain(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let digits: String = self.digits.iter().map(|d| char::from(b'0' + d)).collect();
        let mut out = String::from(if self.neg { "-" } else { "" });
        if self.exp >= 0 {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', self.exp as usize));
        } else {
            let point = digits.len() as i64 + self.exp;
            if point > 0 {
                out.push_str(&digits[..point as usize]);
                out.push('.');
                out.push_str(&digits[point as usize..]);
            } else {
                out.push_str("0.");
                out.extend(std::iter::repeat_n('0', (-point) as usize));
                out.push_str(&digits);
            }
        }
        out
    }

    /// The magnitude's order: the power of ten of the leading digit.
    fn order(&self) -> i64 {
        self.exp + self.digits.len() as i64 - 1
    }

    fn cmp_abs(&self, other: &Decimal) -> Ordering {
        match (self.is_zero(), other.is_zero()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        self.order().cmp(&other.order()).then_with(|| {
            // Same order: digit by digit from the top, a missing digit being 0.
            let n = self.digits.len().max(other.digits.len());
            (0..n)
                .map(|i| self.digits.get(i).unwrap_or(&0).cmp(other.digits.get(i).unwrap_or(&0)))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        })
    }

    /// `|self − other|`, exactly.
    pub fn abs_diff(&self, other: &Decimal) -> Decimal {
        let exp = self.exp.min(other.exp);
        // Both as integers times 10^exp, least significant digit first.
        let widen = |d: &Decimal| -> Vec<u8> {
            let mut v = vec![0; (d.exp - exp) as usize];
            v.extend(d.digits.iter().rev());
            v
        };
        let (a, b) = (widen(self), widen(other));
        let digits = if self.neg == other.neg {
            // Same sign: the difference of the magnitudes.
            let (big, small) = if self.cmp_abs(other).is_ge() { (a, b) } else { (b, a) };
            sub(&big, &small)
        } else {
            add(&a, &b)
        };
        Decimal { neg: false, digits: digits.into_iter().rev().collect(), exp }.normalized()
    }

    /// Whether `|self − other| ≤ tolerance`.
    pub fn within(&self, other: &Decimal, tolerance: &Decimal) -> bool {
        self.abs_diff(other).cmp_abs(tolerance).is_le()
    }
}

/// Little-endian digit sums and differences (`big ≥ small`).
fn add(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let mut carry = 0;
    for i in 0..a.len().max(b.len()) {
        let s = a.get(i).unwrap_or(&0) + b.get(i).unwrap_or(&0) + carry;
        out.push(s % 10);
        carry = s / 10;
    }
    if carry > 0 {
        out.push(carry);
    }
    out
}

fn sub(big: &[u8], small: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(big.len());
    let mut borrow = 0i8;
    for (i, &b) in big.iter().enumerate() {
        let mut d = b as i8 - *small.get(i).unwrap_or(&0) as i8 - borrow;
        borrow = 0;
        if d < 0 {
            d += 10;
            borrow = 1;
        }
        out.push(d as u8);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap_or_else(|| panic!("{s}"))
    }

    #[test]
    fn equal_values_are_equal_and_nothing_is_rounded() {
        assert_eq!(d("3.50"), d("3.5"));
        assert_eq!(d("+7"), d("7."));
        assert_eq!(d("-0"), d("0.000"));
        assert_eq!(d("2e3"), d("2000"));
        assert_eq!(d("1.5E-3"), d("0.0015"));
        assert_eq!(d(".5"), d("0.5"));
        assert_ne!(d("18446744073709551616"), d("18446744073709551617"), "2^64 and 2^64 + 1");
        assert_ne!(d("0.1000000000000000000001"), d("0.1"));
        assert_ne!(d("-1"), d("1"));
        for bad in ["", "-", ".", "1.2.3", "1e", "e5", "1x", "0x10", "1e10001", "inf", "NaN", " 1"] {
            assert_eq!(Decimal::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn plain_notation() {
        for (s, plain) in [("10", "10"), ("-1234.50", "-1234.5"), ("1e-3", "0.001"), ("12e2", "1200"), ("-0.0", "0")] {
            assert_eq!(d(s).to_plain(), plain, "{s}");
        }
        assert_eq!(d("1e10000").to_plain().len(), 10_001);
    }

    #[test]
    fn differences_are_exact() {
        assert_eq!(d("18446744073709551617").abs_diff(&d("18446744073709551616")), d("1"));
        assert_eq!(d("0.3").abs_diff(&d("0.1")), d("0.2"));
        assert_eq!(d("-1.5").abs_diff(&d("2")), d("3.5"));
        assert_eq!(d("2").abs_diff(&d("-1.5")), d("3.5"));
        assert_eq!(d("1e-9").abs_diff(&d("1e9")), d("999999999.999999999"));
        assert!(d("3.1").within(&d("3.14"), &Decimal::from_f64(0.05).unwrap()));
        assert!(!d("3.1").within(&d("3.16"), &Decimal::from_f64(0.05).unwrap()));
        assert!(d("3.1").within(&d("3.15"), &Decimal::from_f64(0.05).unwrap()), "the bound itself counts");
        assert!(!d("18446744073709551617").within(&d("18446744073709551616"), &d("0")));
        assert_eq!(Decimal::from_f64(1e-6).unwrap(), d("0.000001"));
    }
}
