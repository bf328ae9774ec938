//! A small protobuf wire-format codec: a message is read into its fields, in file order, each
//! kept as the raw wire value, and written back the same way.
//!
//! This is all sentencepiece's `.model` needs (see [`super::sentencepiece`]): five message
//! types of proto2 scalars, strings and nested messages, no maps, no packed repeated fields.
//!
// Why hand-written rather than `prost`: prost drops the fields a struct does not declare, and
// sentencepiece's TrainerSpec has some forty fields (plus extensions and deprecated ones that
// old models still carry) of which the encoder needs ten. Keeping every field as it was read
// makes a load/save round trip byte-identical for free, with no struct to keep in step with
// the upstream `.proto`, and the whole codec is smaller than the prost structs would be.

/// A field's value as the wire carries it. Groups (wire types 3 and 4, deprecated since proto2)
/// are refused when reading.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum WireValue {
    Varint(u64),
    Fixed64(u64),
    Bytes(Vec<u8>),
    Fixed32(u32),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Field {
    pub number: u32,
    pub value: WireValue,
}

/// A message as its list of fields, in the order they were read (or set).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RawMessage {
    pub fields: Vec<Field>,
}

/// Reads a varint at `*pos`, moving past it.
fn read_varint(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf
            .get(*pos)
            .ok_or_else(|| format!("truncated varint at byte {pos}"))?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(format!("varint longer than 10 bytes before byte {pos}"))
}

pub(crate) fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn take<'a>(buf: &'a [u8], pos: &mut usize, n: usize) -> Result<&'a [u8], String> {
    let end = pos
        .checked_add(n)
        .filter(|&end| end <= buf.len())
        .ok_or_else(|| format!("field of {n} bytes at byte {pos} runs past the end"))?;
    let bytes = &buf[*pos..end];
    *pos = end;
    Ok(bytes)
}

impl RawMessage {
    /// Reads every field of `buf`. Errors say what is wrong and at which byte.
    pub fn parse(buf: &[u8]) -> Result<Self, String> {
        let mut fields = Vec::new();
        let mut pos = 0;
        while pos < buf.len() {
            let key = read_varint(buf, &mut pos)?;
            let number = u32::try_from(key >> 3)
                .ok()
                .filter(|&n| n > 0 && n < (1 << 29))
                .ok_or_else(|| format!("invalid field number {} at byte {pos}", key >> 3))?;
            let value = match key & 7 {
                0 => WireValue::Varint(read_varint(buf, &mut pos)?),
                1 => WireValue::Fixed64(u64::from_le_bytes(
                    take(buf, &mut pos, 8)?.try_into().expect("8 bytes"),
                )),
                2 => {
                    let len = read_varint(buf, &mut pos)?;
                    let len =
                        usize::try_from(len).map_err(|_| format!("length {len} too large"))?;
                    WireValue::Bytes(take(buf, &mut pos, len)?.to_vec())
                }
                5 => WireValue::Fixed32(u32::from_le_bytes(
                    take(buf, &mut pos, 4)?.try_into().expect("4 bytes"),
                )),
                t => {
                    return Err(format!(
                        "field {number} has wire type {t}, which is not supported"
                    ))
                }
            };
            fields.push(Field { number, value });
        }
        Ok(RawMessage { fields })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        for f in &self.fields {
            write_field(out, f.number, &f.value);
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }

    /// The last value of field `n` (proto2: the last of repeated occurrences of an optional
    /// field wins).
    pub fn last(&self, n: u32) -> Option<&WireValue> {
        self.fields
            .iter()
            .rev()
            .find(|f| f.number == n)
            .map(|f| &f.value)
    }

    pub fn has(&self, n: u32) -> bool {
        self.fields.iter().any(|f| f.number == n)
    }

    pub fn varint(&self, n: u32) -> Result<Option<u64>, String> {
        match self.last(n) {
            None => Ok(None),
            Some(WireValue::Varint(v)) => Ok(Some(*v)),
            Some(_) => Err(format!("field {n} is not a varint")),
        }
    }

    /// An `int32` (negative values are written as ten-byte varints).
    pub fn int32(&self, n: u32, default: i32) -> Result<i32, String> {
        Ok(self.varint(n)?.map_or(default, |v| v as i64 as i32))
    }

    pub fn bool(&self, n: u32, default: bool) -> Result<bool, String> {
        Ok(self.varint(n)?.map_or(default, |v| v != 0))
    }

    pub fn float(&self, n: u32) -> Result<Option<f32>, String> {
        match self.last(n) {
            None => Ok(None),
            Some(WireValue::Fixed32(v)) => Ok(Some(f32::from_bits(*v))),
            Some(_) => Err(format!("field {n} is not a float")),
        }
    }

    pub fn bytes(&self, n: u32) -> Result<Option<&[u8]>, String> {
        match self.last(n) {
            None => Ok(None),
            Some(WireValue::Bytes(b)) => Ok(Some(b)),
            Some(_) => Err(format!("field {n} is not length-delimited")),
        }
    }

    pub fn string(&self, n: u32) -> Result<Option<&str>, String> {
        self.bytes(n)?
            .map(|b| std::str::from_utf8(b).map_err(|_| format!("field {n} is not UTF-8 text")))
            .transpose()
    }

    /// Sets field `n` to `value`: replaces its occurrences with one, or inserts it before the
    /// first field with a larger number (the order protobuf writers use).
    pub fn set(&mut self, n: u32, value: WireValue) {
        if let Some(i) = self.fields.iter().position(|f| f.number == n) {
            self.fields[i].value = value;
            let mut first = true;
            self.fields.retain(|f| {
                let keep = f.number != n || first;
                first &= f.number != n;
                keep
            });
            return;
        }
        let at = self
            .fields
            .iter()
            .position(|f| f.number > n)
            .unwrap_or(self.fields.len());
        self.fields.insert(at, Field { number: n, value });
    }

    pub fn set_bool(&mut self, n: u32, v: bool) {
        self.set(n, WireValue::Varint(u64::from(v)));
    }

    pub fn set_int32(&mut self, n: u32, v: i32) {
        // int32 is sign-extended to 64 bits on the wire.
        self.set(n, WireValue::Varint(v as i64 as u64));
    }

    pub fn set_bytes(&mut self, n: u32, v: impl Into<Vec<u8>>) {
        self.set(n, WireValue::Bytes(v.into()));
    }
}

pub(crate) fn write_field(out: &mut Vec<u8>, number: u32, value: &WireValue) {
    let wire_type = match value {
        WireValue::Varint(_) => 0,
        WireValue::Fixed64(_) => 1,
        WireValue::Bytes(_) => 2,
        WireValue::Fixed32(_) => 5,
    };
    write_varint(out, (u64::from(number) << 3) | wire_type);
    match value {
        WireValue::Varint(v) => write_varint(out, *v),
        WireValue::Fixed64(v) => out.extend_from_slice(&v.to_le_bytes()),
        WireValue::Bytes(b) => {
            write_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        WireValue::Fixed32(v) => out.extend_from_slice(&v.to_le_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_their_edges() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX, -1i64 as u64] {
            let mut buf = Vec::new();
            write_varint(&mut buf, v);
            let mut pos = 0;
            assert_eq!(read_varint(&buf, &mut pos).unwrap(), v);
            assert_eq!(pos, buf.len());
        }
    }

    #[test]
    fn fields_keep_their_order_and_negative_int32_reads_back() {
        let mut m = RawMessage::default();
        m.set_bytes(1, "piece");
        m.set(2, WireValue::Fixed32(1.5f32.to_bits()));
        m.set_int32(43, -1);
        m.set_bool(3, true); // inserted between 2 and 43
        let bytes = m.to_bytes();
        let back = RawMessage::parse(&bytes).unwrap();
        assert_eq!(back, m);
        assert_eq!(
            back.fields.iter().map(|f| f.number).collect::<Vec<_>>(),
            [1, 2, 3, 43]
        );
        assert_eq!(back.int32(43, 0).unwrap(), -1);
        assert_eq!(back.float(2).unwrap(), Some(1.5));
        assert_eq!(back.string(1).unwrap(), Some("piece"));
        assert!(back.bool(3, false).unwrap());
        assert!(back.bool(9, true).unwrap());
    }

    #[test]
    fn broken_input_is_an_error_not_a_panic() {
        for bad in [
            &[0x0a, 0x05, b'a'][..], // length past the end
            &[0x08, 0x80][..],       // truncated varint
            &[0x0b][..],             // group start
            &[0x00, 0x01][..],       // field number 0
            &[0x15, 0x00, 0x00][..], // short fixed32
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ][..],
        ] {
            assert!(RawMessage::parse(bad).is_err(), "{bad:?}");
        }
    }
}
