//! Enum types (CREATE TYPE name AS ENUM): a value is one of the type's labels, kept as text;
//! values order by the labels' places in the type, as in PostgreSQL.
//!
//! Every label has a sort order (a float4, as pg_enum.enumsortorder): 1, 2, 3... at CREATE
//! TYPE, one past the last for ADD VALUE, halfway between two neighbours for ADD VALUE
//! BEFORE/AFTER, so no existing label's order ever changes and stored values stay valid.

use std::cmp::Ordering;

use crate::error::{sqlstate, SqlError, SqlResult};

/// PostgreSQL's limit on a label's length (NAMEDATALEN - 1 bytes).
pub const LABEL_LENGTH_MAX: usize = 63;
/// The most labels a type has (pg_enum's oids of a type are numbered within 1024).
pub const LABEL_COUNT_MAX: usize = 1024;

/// One label of an enum type.
#[derive(Debug, Clone, PartialEq)]
pub struct EnumLabel {
    pub label: String,
    pub sort_order: f32,
    /// Numbers the labels in the order they were added (pg_enum's oids derive from it).
    pub number: u32,
}

/// An enum type: its name, its oid (set by the catalog) and its labels by sort order.
#[derive(Debug, Clone, PartialEq)]
pub struct EnumType {
    pub name: String,
    pub oid: u32,
    pub labels: Vec<EnumLabel>,
    /// Labels renamed (RENAME VALUE) since the catalog was read: a snapshot from before the
    /// rename still reads rows holding the old text, which sort where the label does. Kept
    /// in memory only (no snapshot outlives the process); never accepted as input.
    pub former: Vec<EnumLabel>,
}

/// Where ALTER TYPE ... ADD VALUE puts a new label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelPlace {
    Last,
    Before(String),
    After(String),
}

impl EnumType {
    /// A new type with `labels` in this order (checked: distinct, at most 63 bytes long; an
    /// empty label is one, as in PostgreSQL).
    pub fn new(name: String, labels: &[String]) -> SqlResult<EnumType> {
        let mut enum_type = EnumType {
            name,
            oid: 0,
            labels: Vec::with_capacity(labels.len()),
            former: Vec::new(),
        };
        for label in labels {
            enum_type.add(label, &LabelPlace::Last)?;
        }
        Ok(enum_type)
    }

    fn find(&self, label: &str) -> Option<&EnumLabel> {
        self.labels.iter().find(|l| l.label == label)
    }

    pub fn contains(&self, label: &str) -> bool {
        self.find(label).is_some()
    }

    /// Checks that `text` is one of the labels (22P02 otherwise, as PostgreSQL's enum_in).
    pub fn check(&self, text: &str) -> SqlResult<()> {
        self.find(text)
            .map(|_| ())
            .ok_or_else(|| self.invalid(text))
    }

    fn invalid(&self, text: &str) -> SqlError {
        SqlError::new(
            sqlstate::INVALID_TEXT_REPRESENTATION,
            format!("invalid input value for enum {}: \"{text}\"", self.name),
        )
    }

    /// The sort order of the label `text` (22P02 if it is not one, nor a former name of one
    /// that rows an older snapshot reads may hold).
    pub fn sort_order(&self, text: &str) -> SqlResult<f32> {
        let former = || self.former.iter().find(|l| l.label == text);
        (self.find(text).or_else(former).map(|l| l.sort_order)).ok_or_else(|| self.invalid(text))
    }

    /// 22023 if `label` is longer than 63 bytes.
    fn check_label_length(label: &str) -> SqlResult<()> {
        if label.len() > LABEL_LENGTH_MAX {
            return Err(SqlError::new(
                sqlstate::INVALID_PARAMETER_VALUE,
                format!("invalid enum label \"{label}\""),
            )
            .with_detail(format!("Labels must be {LABEL_LENGTH_MAX} bytes or less.")));
        }
        Ok(())
    }

    /// 22023 if `label` is longer than 63 bytes; 42710 if the type has it already.
    fn check_new_label(&self, label: &str) -> SqlResult<()> {
        Self::check_label_length(label)?;
        if self.contains(label) {
            return Err(SqlError::new(
                sqlstate::DUPLICATE_OBJECT,
                format!("enum label \"{label}\" already exists"),
            ));
        }
        Ok(())
    }

    /// The index of the label `name` (22023 if it is not one).
    fn existing(&self, name: &str) -> SqlResult<usize> {
        self.labels
            .iter()
            .position(|l| l.label == name)
            .ok_or_else(|| {
                SqlError::new(
                    sqlstate::INVALID_PARAMETER_VALUE,
                    format!("\"{name}\" is not an existing enum label"),
                )
            })
    }

    /// RENAME VALUE: `from` becomes `to`, keeping its place in the order (22023 if `to` is too
    /// long or `from` is no label, 42710 if `to` is one, in PostgreSQL's order); `from` is
    /// kept as a former name.
    pub fn rename_label(&mut self, from: &str, to: &str) -> SqlResult<()> {
        Self::check_label_length(to)?;
        let index = self.existing(from)?;
        self.check_new_label(to)?;
        self.former.retain(|l| l.label != to);
        self.former.push(self.labels[index].clone());
        self.labels[index].label = to.to_string();
        Ok(())
    }

    /// Adds a label at `place` (42710 if it exists, 22023 if the neighbour named does not).
    pub fn add(&mut self, label: &str, place: &LabelPlace) -> SqlResult<()> {
        self.check_new_label(label)?;
        if self.labels.len() >= LABEL_COUNT_MAX {
            return Err(SqlError::new(
                sqlstate::PROGRAM_LIMIT_EXCEEDED,
                format!("an enum type has at most {LABEL_COUNT_MAX} labels"),
            ));
        }
        let neighbour = |name: &str| self.existing(name);
        let orders = |index: usize| self.labels.get(index).map(|l| l.sort_order);
        let (index, sort_order) = match place {
            LabelPlace::Last => {
                let last = self.labels.last().map_or(0.0, |l| l.sort_order);
                (self.labels.len(), (last.floor() + 1.0))
            }
            LabelPlace::Before(name) => {
                let index = neighbour(name)?;
                let above = self.labels[index].sort_order;
                let below = match index {
                    0 => above - 1.0,
                    _ => self.labels[index - 1].sort_order,
                };
                (index, midpoint(below, above)?)
            }
            LabelPlace::After(name) => {
                let index = neighbour(name)? + 1;
                let below = self.labels[index - 1].sort_order;
                let above = orders(index).unwrap_or(below + 2.0);
                (index, midpoint(below, above)?)
            }
        };
        let number = self.labels.iter().map(|l| l.number + 1).max().unwrap_or(0);
        self.labels.insert(
            index,
            EnumLabel {
                label: label.to_string(),
                sort_order,
                number,
            },
        );
        Ok(())
    }

    /// The order of two labels of this type (text that is no label sorts as 22P02).
    pub fn compare(&self, a: &str, b: &str) -> SqlResult<Ordering> {
        Ok(self.sort_order(a)?.total_cmp(&self.sort_order(b)?))
    }
}

/// A sort order strictly between two neighbours' (54000 once float4 runs out of room, as
/// PostgreSQL would renumber; Hayate does not yet).
fn midpoint(below: f32, above: f32) -> SqlResult<f32> {
    let middle = below + (above - below) / 2.0;
    if middle <= below || middle >= above {
        return Err(SqlError::new(
            sqlstate::PROGRAM_LIMIT_EXCEEDED,
            "no room for another enum label between these two",
        ));
    }
    Ok(middle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mood() -> EnumType {
        let labels = ["sad", "ok", "happy"].map(String::from);
        EnumType::new("mood".into(), &labels).unwrap()
    }

    #[test]
    fn labels_order_by_place_not_text() {
        let mood = mood();
        assert_eq!(mood.compare("sad", "happy").unwrap(), Ordering::Less);
        assert_eq!(mood.compare("ok", "happy").unwrap(), Ordering::Less);
        assert_eq!(mood.compare("ok", "ok").unwrap(), Ordering::Equal);
        let error = mood.check("angry").unwrap_err();
        assert_eq!(error.code, sqlstate::INVALID_TEXT_REPRESENTATION);
        assert!(error.message.contains("enum mood"), "{}", error.message);
    }

    #[test]
    fn added_labels_keep_the_others_orders() {
        let mut mood = mood();
        let before: Vec<f32> = mood.labels.iter().map(|l| l.sort_order).collect();
        mood.add("meh", &LabelPlace::Before("ok".into())).unwrap();
        mood.add("glum", &LabelPlace::Before("sad".into())).unwrap();
        mood.add("elated", &LabelPlace::Last).unwrap();
        mood.add("fine", &LabelPlace::After("ok".into())).unwrap();
        let names: Vec<&str> = mood.labels.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(
            names,
            ["glum", "sad", "meh", "ok", "fine", "happy", "elated"]
        );
        for (label, order) in ["sad", "ok", "happy"].iter().zip(before) {
            assert_eq!(mood.sort_order(label).unwrap(), order);
        }
        let orders: Vec<f32> = mood.labels.iter().map(|l| l.sort_order).collect();
        assert!(orders.windows(2).all(|w| w[0] < w[1]), "{orders:?}");
        let numbers: Vec<u32> = mood.labels.iter().map(|l| l.number).collect();
        assert_eq!(numbers, [4, 0, 3, 1, 6, 2, 5]);
        assert_eq!(
            mood.add("ok", &LabelPlace::Last).unwrap_err().code,
            sqlstate::DUPLICATE_OBJECT
        );
        assert!(mood.add("x", &LabelPlace::After("nope".into())).is_err());
        assert!(mood.add(&"x".repeat(64), &LabelPlace::Last).is_err());
    }

    #[test]
    fn repeated_halving_runs_out_with_an_error_not_a_tie() {
        let mut mood = mood();
        let mut result = Ok(());
        for step in 0..200 {
            result = mood.add(&format!("l{step}"), &LabelPlace::Before("ok".into()));
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result.unwrap_err().code, sqlstate::PROGRAM_LIMIT_EXCEEDED);
        let orders: Vec<f32> = mood.labels.iter().map(|l| l.sort_order).collect();
        assert!(orders.windows(2).all(|w| w[0] < w[1]));
    }
}
