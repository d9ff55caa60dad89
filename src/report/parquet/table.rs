//! One Parquet file written row by row: values are buffered per column and
//! written as a row group every `ROW_GROUP` rows, so memory stays flat
//! whatever the number of rows. Only the types the tables need: 64-bit
//! integers, doubles and UTF-8 strings, each required or optional; the
//! low-level column API of the parquet crate (no Arrow).

use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

/// Rows per row group: large enough for good compression and fast scans,
/// small enough (a few MiB buffered) to keep memory flat.
const ROW_GROUP: usize = 64 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Int,
    Float,
    Text,
    /// Microseconds since the epoch, UTC (Spark and DuckDB read it as a
    /// timestamp; nanosecond timestamps Spark does not read).
    TimestampMicros,
}

/// One column: name, type, whether it may be null.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub name: &'static str,
    pub kind: Kind,
    pub optional: bool,
}

pub const fn int(name: &'static str) -> Column {
    Column {
        name,
        kind: Kind::Int,
        optional: false,
    }
}
pub const fn opt_int(name: &'static str) -> Column {
    Column {
        name,
        kind: Kind::Int,
        optional: true,
    }
}
pub const fn float(name: &'static str) -> Column {
    Column {
        name,
        kind: Kind::Float,
        optional: false,
    }
}
pub const fn text(name: &'static str) -> Column {
    Column {
        name,
        kind: Kind::Text,
        optional: false,
    }
}
pub const fn opt_text(name: &'static str) -> Column {
    Column {
        name,
        kind: Kind::Text,
        optional: true,
    }
}
#[cfg(test)]
pub const fn timestamp(name: &'static str) -> Column {
    Column {
        name,
        kind: Kind::TimestampMicros,
        optional: false,
    }
}

pub const fn opt_timestamp(name: &'static str) -> Column {
    Column {
        name,
        kind: Kind::TimestampMicros,
        optional: true,
    }
}

/// The Parquet schema of `columns`, in its message-type notation.
fn message_type(table: &str, columns: &[Column]) -> String {
    let mut s = format!("message {table} {{\n");
    for c in columns {
        let rep = if c.optional { "optional" } else { "required" };
        let (ty, logical) = match c.kind {
            Kind::Int => ("int64", ""),
            Kind::Float => ("double", ""),
            Kind::Text => ("binary", " (UTF8)"),
            Kind::TimestampMicros => ("int64", " (TIMESTAMP(MICROS,true))"),
        };
        s.push_str(&format!("  {rep} {ty} {}{logical};\n", c.name));
    }
    s.push('}');
    s
}

enum Values {
    Int(Vec<i64>),
    Float(Vec<f64>),
    Text(Vec<ByteArray>),
}

struct Buffer {
    values: Values,
    /// Definition levels of an optional column (1 = present).
    defs: Option<Vec<i16>>,
}

/// A value for [`TableWriter::push`].
#[derive(Clone, Debug, PartialEq)]
pub enum Cell<'a> {
    Int(i64),
    Float(f64),
    Text(&'a str),
    Null,
}

impl From<u64> for Cell<'_> {
    fn from(v: u64) -> Self {
        Cell::Int(v.min(i64::MAX as u64) as i64)
    }
}
impl From<u32> for Cell<'_> {
    fn from(v: u32) -> Self {
        Cell::Int(v as i64)
    }
}
impl From<i64> for Cell<'_> {
    fn from(v: i64) -> Self {
        Cell::Int(v)
    }
}
impl From<i32> for Cell<'_> {
    fn from(v: i32) -> Self {
        Cell::Int(v as i64)
    }
}
impl From<f64> for Cell<'_> {
    fn from(v: f64) -> Self {
        Cell::Float(v)
    }
}
impl<'a> From<&'a str> for Cell<'a> {
    fn from(v: &'a str) -> Self {
        Cell::Text(v)
    }
}
impl<'a, T: Into<Cell<'a>>> From<Option<T>> for Cell<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Cell::Null, Into::into)
    }
}

pub struct TableWriter {
    columns: &'static [Column],
    buffers: Vec<Buffer>,
    rows: usize,
    pub total_rows: u64,
    writer: SerializedFileWriter<File>,
}

pub type Error = parquet::errors::ParquetError;
pub type Result<T> = std::result::Result<T, Error>;

impl TableWriter {
    pub fn create(path: &Path, table: &str, columns: &'static [Column]) -> Result<TableWriter> {
        let schema = parquet::schema::parser::parse_message_type(&message_type(table, columns))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("iosleuth {}", env!("CARGO_PKG_VERSION")))
            .build();
        let file = File::create(path)?;
        let writer = SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props))?;
        let buffers = columns
            .iter()
            .map(|c| Buffer {
                values: match c.kind {
                    Kind::Int | Kind::TimestampMicros => Values::Int(Vec::new()),
                    Kind::Float => Values::Float(Vec::new()),
                    Kind::Text => Values::Text(Vec::new()),
                },
                defs: c.optional.then(Vec::new),
            })
            .collect();
        Ok(TableWriter {
            columns,
            buffers,
            rows: 0,
            total_rows: 0,
            writer,
        })
    }

    /// Adds one row: a cell per column, in the columns' order. A cell of
    /// the wrong type, or a null in a required column, is a bug here.
    pub fn push(&mut self, row: &[Cell]) -> Result<()> {
        assert_eq!(row.len(), self.columns.len(), "one cell per column");
        for ((cell, buf), col) in row.iter().zip(&mut self.buffers).zip(self.columns) {
            if let Some(defs) = &mut buf.defs {
                defs.push(i16::from(*cell != Cell::Null));
            }
            match (cell, &mut buf.values) {
                (Cell::Int(v), Values::Int(out)) => out.push(*v),
                (Cell::Float(v), Values::Float(out)) => out.push(*v),
                (Cell::Text(v), Values::Text(out)) => {
                    // Most text columns repeat (kernel, device, op, comm):
                    // share the previous row's bytes instead of a copy.
                    let same = out.last().filter(|l| l.data() == v.as_bytes()).cloned();
                    out.push(same.unwrap_or_else(|| ByteArray::from(v.as_bytes().to_vec())));
                }
                (Cell::Null, _) if col.optional => {}
                _ => panic!("column {}: {cell:?} does not fit its type", col.name),
            }
        }
        self.rows += 1;
        self.total_rows += 1;
        if self.rows >= ROW_GROUP {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let mut group = self.writer.next_row_group()?;
        for buf in &mut self.buffers {
            let mut col = group
                .next_column()?
                .expect("one column writer per schema column");
            let defs = buf.defs.as_deref();
            match &mut buf.values {
                Values::Int(v) => {
                    col.typed::<Int64Type>().write_batch(v, defs, None)?;
                    v.clear();
                }
                Values::Float(v) => {
                    col.typed::<DoubleType>().write_batch(v, defs, None)?;
                    v.clear();
                }
                Values::Text(v) => {
                    col.typed::<ByteArrayType>().write_batch(v, defs, None)?;
                    v.clear();
                }
            }
            if let Some(d) = &mut buf.defs {
                d.clear();
            }
            col.close()?;
        }
        group.close()?;
        self.rows = 0;
        Ok(())
    }

    /// Writes what is buffered and the footer.
    pub fn finish(mut self) -> Result<u64> {
        self.flush()?;
        self.writer.close()?;
        Ok(self.total_rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_text_names_every_column_with_its_type() {
        const COLS: &[Column] = &[
            int("a"),
            opt_int("b"),
            text("c"),
            float("d"),
            timestamp("t"),
        ];
        let m = message_type("x", COLS);
        assert!(m.contains("required int64 a;"), "{m}");
        assert!(m.contains("optional int64 b;"), "{m}");
        assert!(m.contains("required binary c (UTF8);"), "{m}");
        assert!(m.contains("required double d;"), "{m}");
        assert!(
            m.contains("required int64 t (TIMESTAMP(MICROS,true));"),
            "{m}"
        );
        parquet::schema::parser::parse_message_type(&m).expect("parquet parses it");
    }

    #[test]
    fn rows_come_back_from_the_file() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        const COLS: &[Column] = &[int("n"), opt_int("maybe"), text("name")];
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.parquet");
        let mut w = TableWriter::create(&p, "t", COLS).unwrap();
        for i in 0..(ROW_GROUP as u64 + 10) {
            let maybe = (i % 2 == 0).then_some(i);
            w.push(&[i.into(), maybe.into(), "x".into()]).unwrap();
        }
        assert_eq!(w.finish().unwrap(), ROW_GROUP as u64 + 10);
        let r = SerializedFileReader::new(File::open(&p).unwrap()).unwrap();
        let md = r.metadata();
        assert_eq!(md.num_row_groups(), 2);
        assert_eq!(md.file_metadata().num_rows(), ROW_GROUP as i64 + 10);
    }
}
