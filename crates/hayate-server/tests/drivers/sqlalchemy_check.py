"""SQLAlchemy (Debian's 1.4, psycopg2 dialect) against the server: declarative models with a
foreign key (ON DELETE CASCADE), a CHECK and a native enum type, the ORM's inserts,
relationship loading, enum filters and ordering and cascading deletes, then reflection of
what it created. Every answer is checked here; prints
"sqlalchemy ok" at the end.
Usage: sqlalchemy_check.py PORT"""

import sys

from sqlalchemy import (CheckConstraint, Column, Enum, ForeignKey, Integer, MetaData, String,
                        Table, create_engine, exc, inspect, select)
from sqlalchemy.orm import Session, declarative_base, relationship

engine = create_engine(f"postgresql+psycopg2://tester@127.0.0.1:{sys.argv[1]}/test")
Base = declarative_base()


class User(Base):
    __tablename__ = "users"
    id = Column(Integer, primary_key=True)
    name = Column(String(50), nullable=False, unique=True)
    # A native enum: CREATE TYPE mood AS ENUM, made and dropped with the tables.
    mood = Column(Enum("sad", "ok", "happy", name="mood"), nullable=False, server_default="ok")
    addresses = relationship("Address", back_populates="user", passive_deletes=True)


class Address(Base):
    __tablename__ = "addresses"
    id = Column(Integer, primary_key=True)
    email = Column(String(100), nullable=False, index=True)
    user_id = Column(Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False)
    user = relationship("User", back_populates="addresses")
    __table_args__ = (CheckConstraint("length(email) > 3", name="email_len"),)


Base.metadata.drop_all(engine)
Base.metadata.create_all(engine)

with Session(engine) as session:
    session.add_all([
        User(name="ann", addresses=[Address(email="ann@x.org"), Address(email="a2@x.org")]),
        User(name="bob", addresses=[Address(email="bob@x.org")], mood="happy"),
        User(name="cy", mood="sad"),
    ])
    session.commit()
    # Enum values order by the type (sad < ok < happy), not alphabetically.
    names = session.execute(select(User.name).order_by(User.mood.desc())).scalars().all()
    assert names == ["bob", "ann", "cy"], names
    names = session.execute(select(User.name).where(User.mood > "sad")
                            .order_by(User.name)).scalars().all()
    assert names == ["ann", "bob"], names
    ann = session.execute(select(User).where(User.name == "ann")).scalar_one()
    assert sorted(a.email for a in ann.addresses) == ["a2@x.org", "ann@x.org"], ann.addresses

# The constraints hold through the ORM: a dangling user_id, a short email.
for bad in (Address(email="who@x.org", user_id=999), Address(email="no", user_id=1)):
    with Session(engine) as session:
        session.add(bad)
        try:
            session.commit()
            raise AssertionError(f"{bad.email} was accepted")
        except exc.IntegrityError as error:
            assert error.orig.pgcode in ("23503", "23514"), error.orig.pgcode

# A value that is not a label of the type.
with Session(engine) as session:
    session.add(User(name="dee"))
    session.flush()
    try:
        session.execute(User.__table__.update().where(User.name == "dee").values(mood="glad"))
        raise AssertionError("a value outside the enum was accepted")
    except exc.DataError as error:
        assert error.orig.pgcode == "22P02", error.orig.pgcode

# ON DELETE CASCADE in the database.
with Session(engine) as session:
    session.delete(session.execute(select(User).where(User.name == "ann")).scalar_one())
    session.commit()
    emails = session.execute(select(Address.email)).scalars().all()
    assert emails == ["bob@x.org"], emails

inspector = inspect(engine)
assert sorted(inspector.get_table_names()) == ["addresses", "users"]
enums = inspector.get_enums()
assert [(e["name"], e["labels"]) for e in enums] == [("mood", ["sad", "ok", "happy"])], enums
mood = {c["name"]: c for c in inspector.get_columns("users")}["mood"]
assert isinstance(mood["type"], Enum) and mood["type"].enums == ["sad", "ok", "happy"], mood
assert mood["type"].name == "mood" and not mood["nullable"], mood
columns = {c["name"]: c for c in inspector.get_columns("addresses")}
assert list(columns) == ["id", "email", "user_id"], columns
assert columns["email"]["type"].length == 100 and not columns["email"]["nullable"]
assert columns["id"]["autoincrement"], columns["id"]
assert inspector.get_pk_constraint("addresses")["constrained_columns"] == ["id"]
keys = inspector.get_foreign_keys("addresses")
assert len(keys) == 1, keys
assert keys[0]["referred_table"] == "users" and keys[0]["referred_columns"] == ["id"], keys
assert keys[0]["constrained_columns"] == ["user_id"], keys
assert keys[0]["options"].get("ondelete") == "CASCADE", keys
indexes = inspector.get_indexes("addresses")
assert [(i["name"], i["column_names"]) for i in indexes] == [
    ("ix_addresses_email", ["email"])], indexes
uniques = inspector.get_unique_constraints("users")
assert [(u["name"], u["column_names"]) for u in uniques] == [("users_name_key", ["name"])], uniques
checks = inspector.get_check_constraints("addresses")
assert [c["name"] for c in checks] == ["email_len"], checks
assert "length(email) > 3" in checks[0]["sqltext"], checks
reflected = Table("addresses", MetaData(), autoload_with=engine)
assert [fk.target_fullname for fk in reflected.foreign_keys] == ["users.id"]
assert [c.name for c in reflected.primary_key] == ["id"]
print("sqlalchemy ok")
