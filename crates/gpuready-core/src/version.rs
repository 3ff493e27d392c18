//! Version-like values GFD publishes as strings: driver versions, CUDA versions and
//! compute capabilities, parsed strictly and compared numerically.

use std::cmp::Ordering;
use std::fmt;

/// An NVIDIA driver version: `major.minor[.patch]`. GFD writes 2-part versions
/// for real releases such as `570.26` (with `rev=""`), so the patch is optional
/// and compares as 0. Zero-padded parts (`07`) compare by value.
#[derive(Clone, Debug, Eq)]
pub struct DriverVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: Option<u32>,
    raw: String,
}

impl DriverVersion {
    /// Parses `580.65.06` or `570.26`. Anything else is an error naming what is wrong.
    pub fn parse(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split('.').collect();
        if !(2..=3).contains(&parts.len()) {
            return Err(format!(
                "expected major.minor[.patch], got {} part(s)",
                parts.len()
            ));
        }
        let num = |p: &str| -> Result<u32, String> {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("{p:?} is not a number"));
            }
            p.parse::<u32>().map_err(|e| format!("{p:?}: {e}"))
        };
        Ok(DriverVersion {
            major: num(parts[0])?,
            minor: num(parts[1])?,
            patch: parts.get(2).map(|p| num(p)).transpose()?,
            raw: s.to_owned(),
        })
    }

    fn key(&self) -> (u32, u32, u32) {
        (self.major, self.minor, self.patch.unwrap_or(0))
    }

    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

impl PartialEq for DriverVersion {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl PartialOrd for DriverVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for DriverVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}
impl fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// A `major.minor` pair: CUDA versions and compute capabilities.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MajorMinor {
    pub major: u32,
    pub minor: u32,
}

impl MajorMinor {
    pub const fn new(major: u32, minor: u32) -> Self {
        MajorMinor { major, minor }
    }

    /// Parses `13.0`, `8.6`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (maj, min) = s
            .split_once('.')
            .ok_or_else(|| format!("{s:?} is not major.minor"))?;
        Ok(MajorMinor {
            major: parse_number(maj)?,
            minor: parse_number(min)?,
        })
    }
}

impl fmt::Display for MajorMinor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A decimal label value: digits only (no sign, unit or space).
pub fn parse_number<T: std::str::FromStr>(s: &str) -> Result<T, String>
where
    T::Err: fmt::Display,
{
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{s:?} is not a whole number"));
    }
    s.parse::<T>().map_err(|e| format!("{s:?}: {e}"))
}

#[cfg(test)]
mod tests;
