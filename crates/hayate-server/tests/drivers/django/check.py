#!/usr/bin/env python3
"""Django-on-Hayate CI check.

    HAYATE_HOST=127.0.0.1 HAYATE_PORT=5441 HAYATE_DB=djangoci /usr/bin/python3 check.py

Needs an EMPTY database HAYATE_DB (user postgres, no password) on a running Hayate
server.  Runs `migrate` (contenttypes, auth, catalog 0001..0007), an ORM scenario with
assertions, `flush`, and a second `migrate` that must be a no-op.  Prints
"DJANGO CHECK OK" and exits 0 on success; on the first failure prints the failing step
with a traceback and exits 1.  Writes no files (bytecode caching is disabled).
"""
import sys

sys.dont_write_bytecode = True

import contextlib  # noqa: E402
import datetime  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import uuid  # noqa: E402
from decimal import Decimal  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ["DJANGO_SETTINGS_MODULE"] = "ciproject.settings"

import django  # noqa: E402

django.setup()

from django.contrib.auth import authenticate  # noqa: E402
from django.contrib.auth.models import Group, Permission, User  # noqa: E402
from django.contrib.contenttypes.models import ContentType  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import IntegrityError, connection, transaction  # noqa: E402
from django.db.migrations.executor import MigrationExecutor  # noqa: E402
from django.db.migrations.recorder import MigrationRecorder  # noqa: E402
from django.db.models import (Avg, Count, DateTimeField, DecimalField, Exists,  # noqa: E402
                              ExpressionWrapper, F, Max, Min, OuterRef, Q, Subquery, Sum)
from django.db.models.functions import ExtractMonth, Length, TruncDate, TruncMonth  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from catalog.models import Author, Book, Label, Publisher, Review  # noqa: E402

Tag = Label  # 0007 renamed the model

UTC = datetime.timezone.utc
TD = datetime.timedelta
T0 = time.monotonic()


class Rollback(Exception):
    pass


@contextlib.contextmanager
def step(name):
    t = time.monotonic()
    try:
        yield
    except BaseException:
        print("FAILED step: %s" % name, flush=True)
        traceback.print_exc()
        sys.exit(1)
    print("  ok  %-34s %5.2fs" % (name, time.monotonic() - t), flush=True)


def expect_integrity_error(sqlstate, fn):
    try:
        with transaction.atomic():
            fn()
    except IntegrityError as e:
        got = getattr(e.__cause__, "pgcode", None)
        assert got == sqlstate, "expected SQLSTATE %s, got %s (%s)" % (sqlstate, got, e)
        return
    raise AssertionError("expected IntegrityError %s, nothing raised" % sqlstate)


def columns(table):
    with connection.cursor() as cur:
        return {c.name: c for c in connection.introspection.get_table_description(cur, table)}


def constraints(table):
    with connection.cursor() as cur:
        return connection.introspection.get_constraints(cur, table)


def column(table, name):
    with connection.cursor() as cur:
        cols = {c.name: c for c in connection.introspection.get_table_description(cur, table)}
    assert name in cols, "%s.%s missing; columns: %s" % (table, name, sorted(cols))
    return cols[name]


def main():
    db = os.environ["HAYATE_DB"]
    print("Django %s against %s:%s/%s" % (django.get_version(), os.environ["HAYATE_HOST"],
                                          os.environ["HAYATE_PORT"], db), flush=True)

    # ------------------------------------------------------------------ schema
    with step("database is fresh"):
        tables = connection.introspection.table_names()
        assert tables == [], "database %r is not empty: %s" % (db, tables)

    with step("migrate"):
        call_command("migrate", interactive=False, verbosity=0, stdout=io.StringIO())
        tables = set(connection.introspection.table_names())
        expected = {"django_migrations", "django_content_type", "auth_user", "auth_group",
                    "auth_permission", "auth_user_groups", "catalog_publisher", "catalog_author",
                    "catalog_label", "catalog_book", "catalog_book_authors", "catalog_book_tags",
                    "catalog_review"}
        assert expected <= tables, "missing tables: %s" % sorted(expected - tables)
        applied = MigrationRecorder(connection).applied_migrations()
        for key in [("contenttypes", "0002_remove_content_type_name"),
                    ("auth", "0012_alter_user_first_name_max_length"),
                    ("catalog", "0007_rename_tag_and_email")]:
            assert key in applied, "migration %s not recorded" % (key,)
        # effects of catalog 0003 (ADD COLUMN DEFAULT, ALTER COLUMN TYPE) and auth 0008/0012
        assert column("catalog_publisher", "country").internal_size == 3
        assert column("catalog_review", "rating").type_code == 23  # int4 (was int2)
        assert column("catalog_book", "pages").null_ok is False
        assert column("auth_user", "first_name").internal_size == 150
        # effects of catalog 0004 (AddField FK, AddIndex) and 0005 (RemoveField FK, RemoveIndex)
        assert column("catalog_book", "translator_id").null_ok is True
        assert "reviewer_id" not in columns("catalog_review"), sorted(columns("catalog_review"))
        book = constraints("catalog_book")
        fks = {n: c["foreign_key"] for n, c in book.items() if c["foreign_key"]}
        assert sorted(fks.values()) == [("catalog_author", "id"), ("catalog_author", "id"),
                                        ("catalog_publisher", "id")], fks
        assert any(n.startswith("catalog_book_translator_id_") for n in fks), fks
        assert book.get("book_title_pub_idx", {}).get("index") is True, sorted(book)
        # get_constraints() gets the columns as lists (array results typed text[])
        assert book["book_title_pub_idx"]["columns"] == ["title", "published"], book
        # 0006 found Publisher.name's UNIQUE constraint and dropped it
        assert not [c for c in constraints("catalog_publisher").values()
                    if c["unique"] and c["columns"] == ["name"]], constraints("catalog_publisher")
        assert "book_pub_price_idx" not in book, sorted(book)
        review = constraints("catalog_review")
        assert [n for n in review if "reviewer" in n] == [], sorted(review)
        # 0007: RenameModel (RENAME TO, the M2M column follows) and RenameField
        assert "catalog_tag" not in tables, sorted(tables)
        assert "label_id" in columns("catalog_book_tags"), sorted(columns("catalog_book_tags"))
        m2m = constraints("catalog_book_tags")
        assert ("catalog_label", "id") in [c["foreign_key"] for c in m2m.values()], m2m
        assert "contact" in columns("catalog_author") and "email" not in columns("catalog_author")

    with step("makemigrations --check"):
        try:
            call_command("makemigrations", check=True, dry_run=True, verbosity=0,
                         stdout=io.StringIO())
        except SystemExit as e:
            raise AssertionError("models and migrations differ (makemigrations --check: %s)" % e)

    # ------------------------------------------------------------------ auth
    with step("auth users/permissions"):
        u = User.objects.create_user("ci", "ci@example.com", "pw-ci")
        g = Group.objects.create(name="editors")
        ct = ContentType.objects.get_for_model(Book)
        assert Permission.objects.filter(content_type__app_label="catalog").count() == 20
        g.permissions.add(*Permission.objects.filter(content_type=ct,
                                                     codename__in=["add_book", "change_book"]))
        u.groups.add(g)
        u = User.objects.get(pk=u.pk)
        assert u.has_perm("catalog.add_book") and not u.has_perm("catalog.delete_book")
        assert authenticate(username="ci", password="pw-ci") is not None
        assert authenticate(username="ci", password="wrong") is None

    # ------------------------------------------------------------------ data
    with step("create / bulk_create / m2m"):
        pubs = Publisher.objects.bulk_create([Publisher(name="Hayakawa", country="JPN"),
                                              Publisher(name="Tor", country="USA"),
                                              Publisher(name="Gollancz", country="GBR")])
        assert all(p.pk is not None for p in pubs), "bulk_create must return pks"
        hayakawa, tor, gollancz = pubs
        authors = Author.objects.bulk_create([Author(name=n, active=n != "Banks")
                                              for n in ("Asimov", "Herbert", "Le Guin", "Banks")])
        asimov, herbert, leguin, banks = authors
        scifi, created = Tag.objects.get_or_create(name="scifi")
        assert created
        scifi2, created = Tag.objects.get_or_create(name="scifi")
        assert not created and scifi2.pk == scifi.pk
        classic = Tag.objects.create(name="classic")
        space = Tag.objects.create(name="space")

        foundation = Book.objects.create(
            title="Foundation", publisher=tor, editor=leguin, price=Decimal("12.50"),
            published=datetime.datetime(2023, 1, 31, 23, 30, tzinfo=UTC),
            summary="Psychohistory. " * 400 + "日本語 ✓", translator=banks,
            metadata={"genre": "scifi", "pages": 255, "series": "Foundation", "award": "Hugo",
                      "dims": {"w": 11, "h": 18}})
        dune = Book.objects.create(
            title="Dune", publisher=gollancz, editor=banks, price=Decimal("20.00"),
            # 01:00 at UTC+2 is 2023-01-31 23:00 UTC
            published=datetime.datetime(2023, 2, 1, 1, 0, tzinfo=datetime.timezone(TD(hours=2))),
            loan_period=TD(days=21), metadata={"genre": "scifi", "pages": 412, "award": "Nebula"})
        more = Book.objects.bulk_create([
            Book(title="The Dispossessed", publisher=tor, price=Decimal("9.99"),
                 published=datetime.datetime(2023, 3, 15, 12, 0, tzinfo=UTC),
                 loan_period=TD(days=7), metadata={"genre": "scifi", "pages": 387}),
            Book(title="Consider Phlebas", publisher=hayakawa, editor=banks,
                 price=Decimal("15.00"), in_print=False,
                 published=datetime.datetime(2023, 3, 1, 0, 30, tzinfo=UTC),
                 metadata={"genre": "space opera", "pages": 471, "series": "Culture"}),
        ])
        assert all(b.pk is not None for b in more)
        dispossessed, phlebas = more
        foundation.authors.add(asimov)
        foundation.tags.set([scifi, classic])
        dune.authors.add(herbert)
        dune.tags.add(scifi, space)
        dispossessed.authors.add(leguin)
        dispossessed.tags.add(classic)
        phlebas.authors.add(banks)
        phlebas.tags.add(space)
        Review.objects.bulk_create([Review(book=foundation, rating=5, body="classic"),
                                    Review(book=foundation, rating=4, body="dated"),
                                    Review(book=dune, rating=5, body="spice"),
                                    Review(book=dispossessed, rating=3, body="ambiguous")])
        assert Book.objects.count() == 4 and Review.objects.count() == 4
        assert len({b.code for b in Book.objects.all()}) == 4, "uuid defaults must differ"
        assert Book.objects.get(pk=foundation.pk).summary.endswith("日本語 ✓")

    with step("constraints (23505 / 23514)"):
        expect_integrity_error("23505", lambda: Book.objects.create(  # unique_together
            title="Foundation", publisher=tor, price=1, published=foundation.published))
        Book.objects.create(title="Foundation", publisher=hayakawa, price=Decimal("1.00"),
                            published=foundation.published).delete()  # other publisher: allowed
        expect_integrity_error("23505", lambda: Tag.objects.create(name="space"))
        expect_integrity_error("23505", lambda: Book.objects.create(  # unique uuid
            title="Clone", publisher=tor, price=1, published=foundation.published,
            code=foundation.code))
        # CHECK ("rating" >= 0) must survive 0003's smallint -> integer
        expect_integrity_error("23514", lambda: Review.objects.create(book=dune, rating=-1, body="x"))
        # FK added by 0004 (DEFERRABLE INITIALLY DEFERRED: PostgreSQL reports it at COMMIT)
        expect_integrity_error("23503", lambda: Book.objects.filter(pk=dune.pk).update(
            translator_id=Author.objects.aggregate(m=Max("id"))["m"] + 1000))
        assert Book.objects.get(translator__name="Banks").title == "Foundation"
        # 0006 dropped Publisher.name's UNIQUE constraint: a second "Tor" is allowed.
        Publisher.objects.create(name="Tor", country="NZL").delete()

    with step("filters / ordering / types"):
        titles = list(Book.objects.order_by("-price", "title").values_list("title", flat=True))
        assert titles == ["Dune", "Consider Phlebas", "Foundation", "The Dispossessed"], titles
        assert list(Book.objects.order_by("title")[1:3].values_list("title", flat=True)) == \
            ["Dune", "Foundation"]
        assert list(Author.objects.filter(name__startswith="Le").values_list("name", flat=True)) \
            == ["Le Guin"]
        assert Author.objects.filter(name__icontains="ER").count() == 1  # Herbert
        assert Author.objects.filter(active=False).get().name == "Banks"
        assert Book.objects.filter(in_print=False).get().title == "Consider Phlebas"
        p = Book.objects.get(title="The Dispossessed").price
        assert p == Decimal("9.99") and isinstance(p, Decimal), repr(p)
        assert Book.objects.filter(price__gte=Decimal("12.50"), price__lt=20).count() == 2
        assert Book.objects.filter(Q(editor__isnull=True) | Q(editor__name="Le Guin")).count() == 2
        assert Book.objects.exclude(publisher__country="USA").count() == 2
        assert Book.objects.filter(tags__name__in=["scifi", "classic"]).distinct().count() == 3
        assert Book.objects.filter(authors__name="Asimov", tags__name="classic").count() == 1

    # ------------------------------------------------------------------ aggregates
    with step("aggregate / Count(filter=)"):
        agg = Book.objects.aggregate(n=Count("id"), total=Sum("price"), avg=Avg("price"),
                                     mx=Max("price"), mn=Min("price"),
                                     n_print=Count("id", filter=Q(in_print=True)),
                                     n_tor=Count("id", filter=Q(publisher__name="Tor")))
        assert (agg["n"], agg["total"], agg["mx"], agg["mn"], agg["n_print"], agg["n_tor"]) == \
            (4, Decimal("57.49"), Decimal("20.00"), Decimal("9.99"), 3, 2), agg
        assert abs(agg["avg"] - Decimal("14.3725")) < Decimal("0.0001"), agg
        assert Review.objects.aggregate(a=Avg("rating"))["a"] == 4.25
        assert Book.objects.filter(price__gt=1000).aggregate(s=Sum("price"))["s"] is None

    with step("values().annotate()"):
        rows = list(Publisher.objects.values("name").annotate(
            n=Count("books"), n_print=Count("books", filter=Q(books__in_print=True)),
            total=Sum("books__price")).order_by("-n", "name"))
        assert [(r["name"], r["n"], r["n_print"], r["total"]) for r in rows] == [
            ("Tor", 2, 2, Decimal("22.49")), ("Gollancz", 1, 1, Decimal("20.00")),
            ("Hayakawa", 1, 0, Decimal("15.00"))], rows
        rows = list(Book.objects.values("title").annotate(
            nr=Count("reviews"), best=Max("reviews__rating")).filter(nr__gte=1).order_by("title"))
        assert [(r["title"], r["nr"], r["best"]) for r in rows] == [
            ("Dune", 1, 5), ("Foundation", 2, 5), ("The Dispossessed", 1, 3)], rows
        rows = list(Tag.objects.values("name").annotate(n=Count("books", distinct=True))
                    .order_by("name").values_list("name", "n"))
        assert rows == [("classic", 2), ("scifi", 2), ("space", 2)], rows

    with step("annotate()"):
        b = Book.objects.annotate(
            double=ExpressionWrapper(F("price") * 2, output_field=DecimalField(8, 2)),
            pub_name=F("publisher__name"), m=ExtractMonth("published")).get(title="Dune")
        assert (b.double, b.pub_name, b.m) == (Decimal("40.00"), "Gollancz", 1), \
            (b.double, b.pub_name, b.m)  # published 2023-01-31 23:00 UTC -> month 1
        got = list(Book.objects.annotate(ln=Length("title")).filter(ln__gt=4)
                   .order_by("-ln", "title").values_list("title", "ln"))
        assert got == [("Consider Phlebas", 16), ("The Dispossessed", 16), ("Foundation", 10)], got

    with step("model annotate(Count), GROUP BY pk"):
        # Django groups by the primary key only (functional dependency) and selects all columns
        baen = Publisher.objects.create(name="Baen", country="USA")  # no books
        pubs = list(Publisher.objects.annotate(n=Count("books"), total=Sum("books__price"))
                    .order_by("-n", "name"))
        assert [(p.name, p.country, p.n, p.total) for p in pubs] == [
            ("Tor", "USA", 2, Decimal("22.49")), ("Gollancz", "GBR", 1, Decimal("20.00")),
            ("Hayakawa", "JPN", 1, Decimal("15.00")), ("Baen", "USA", 0, None)], pubs
        pubs = Publisher.objects.annotate(n=Count("books")).filter(n__gte=1).order_by("n", "-name")
        assert [(p.name, p.n) for p in pubs] == [("Hayakawa", 1), ("Gollancz", 1), ("Tor", 2)]
        books = Book.objects.annotate(nr=Count("reviews"), avg=Avg("reviews__rating")) \
            .filter(nr__gt=0).order_by("-nr", "-avg")
        assert [(b.title, b.nr, b.avg) for b in books] == [
            ("Foundation", 2, 4.5), ("Dune", 1, 5.0), ("The Dispossessed", 1, 3.0)], \
            [(b.title, b.nr, b.avg) for b in books]
        b = Book.objects.select_related("publisher").annotate(
            na=Count("authors", distinct=True), nt=Count("tags", distinct=True)).get(title="Dune")
        assert (b.publisher.name, b.na, b.nt) == ("Gollancz", 1, 2), (b.publisher.name, b.na, b.nt)
        baen.delete()

    with step("Subquery(OuterRef)"):
        newest = Book.objects.filter(publisher=OuterRef("pk")).order_by("-published")
        rows = list(Publisher.objects.annotate(newest=Subquery(newest.values("title")[:1]))
                    .order_by("name").values_list("name", "newest"))
        assert rows == [("Gollancz", "Dune"), ("Hayakawa", "Consider Phlebas"),
                        ("Tor", "The Dispossessed")], rows
        top = Book.objects.filter(publisher=OuterRef("pk")).order_by("-price").values("price")[:1]
        rows = list(Publisher.objects.annotate(top=Subquery(top)).filter(top__gte=15)
                    .order_by("-top").values_list("name", "top"))
        assert rows == [("Gollancz", Decimal("20.00")), ("Hayakawa", Decimal("15.00"))], rows
        best = Review.objects.filter(book=OuterRef("pk")).order_by("-rating").values("rating")[:1]
        rows = list(Book.objects.annotate(best=Subquery(best)).order_by("title")
                    .values_list("title", "best"))
        assert rows == [("Consider Phlebas", None), ("Dune", 5), ("Foundation", 5),
                        ("The Dispossessed", 3)], rows

    with step("Exists(OuterRef)"):
        reviewed = Exists(Review.objects.filter(book=OuterRef("pk")))
        rows = list(Book.objects.annotate(r=reviewed).order_by("title").values_list("title", "r"))
        assert rows == [("Consider Phlebas", False), ("Dune", True), ("Foundation", True),
                        ("The Dispossessed", True)], rows
        got = Book.objects.filter(Exists(Review.objects.filter(book=OuterRef("pk"), rating=5)))
        assert sorted(b.title for b in got) == ["Dune", "Foundation"]
        assert [b.title for b in Book.objects.filter(~reviewed)] == ["Consider Phlebas"]
        out_of_print = Book.objects.filter(publisher=OuterRef("pk"), in_print=False)
        assert [p.name for p in Publisher.objects.filter(Exists(out_of_print))] == ["Hayakawa"]

    # ------------------------------------------------------------------ relations
    with step("select_related"):
        with CaptureQueriesContext(connection) as ctx:
            got = [(b.title, b.publisher.name, b.editor.name if b.editor else None)
                   for b in Book.objects.select_related("publisher", "editor").order_by("title")]
        assert len(ctx) == 1, "select_related should need 1 query, used %d" % len(ctx)
        assert got == [("Consider Phlebas", "Hayakawa", "Banks"), ("Dune", "Gollancz", "Banks"),
                       ("Foundation", "Tor", "Le Guin"), ("The Dispossessed", "Tor", None)], got
        r = Review.objects.select_related("book__publisher").get(body="spice")
        assert r.book.publisher.country == "GBR"

    with step("prefetch_related"):
        with CaptureQueriesContext(connection) as ctx:
            books = list(Book.objects.prefetch_related("authors", "tags", "reviews").order_by("title"))
            got = [(b.title, sorted(a.name for a in b.authors.all()),
                    sorted(t.name for t in b.tags.all()), len(b.reviews.all())) for b in books]
        assert len(ctx) == 4, "prefetch_related should need 4 queries, used %d" % len(ctx)
        assert got == [("Consider Phlebas", ["Banks"], ["space"], 0),
                       ("Dune", ["Herbert"], ["scifi", "space"], 1),
                       ("Foundation", ["Asimov"], ["classic", "scifi"], 2),
                       ("The Dispossessed", ["Le Guin"], ["classic"], 1)], got
        pubs = list(Publisher.objects.prefetch_related("books__tags").order_by("name"))
        assert [len(p.books.all()) for p in pubs] == [1, 1, 2]

    # ------------------------------------------------------------------ transactions
    with step("transaction.atomic + savepoints"):
        with transaction.atomic():
            Tag.objects.create(name="outer")
            try:
                with transaction.atomic():  # SAVEPOINT ... ROLLBACK TO SAVEPOINT
                    Tag.objects.create(name="inner")
                    raise Rollback
            except Rollback:
                pass
            try:
                with transaction.atomic():  # statement error inside a savepoint
                    Tag.objects.create(name="scifi")
            except IntegrityError:
                pass
            with transaction.atomic():  # SAVEPOINT ... RELEASE
                Tag.objects.create(name="inner2")
            Tag.objects.create(name="after-error")
        names = set(Tag.objects.values_list("name", flat=True))
        assert {"outer", "inner2", "after-error"} <= names and "inner" not in names, names
        try:
            with transaction.atomic():
                Tag.objects.create(name="doomed")
                raise Rollback
        except Rollback:
            pass
        assert not Tag.objects.filter(name="doomed").exists()
        Tag.objects.filter(name__in=["outer", "inner2", "after-error"]).delete()

    with step("get_or_create / update_or_create"):
        p, created = Publisher.objects.get_or_create(name="Tor", defaults={"country": "XXX"})
        assert not created and p.country == "USA"
        p, created = Publisher.objects.get_or_create(name="Orbit", defaults={"country": "GBR"})
        assert created and p.pk is not None
        p, created = Publisher.objects.update_or_create(name="Orbit", defaults={"country": "USA"})
        assert not created and Publisher.objects.get(name="Orbit").country == "USA"
        p.delete()

    with step("update with F()"):
        n = Book.objects.filter(publisher__name="Tor").update(price=F("price") + Decimal("1.00"))
        assert n == 2, n
        assert Book.objects.get(title="Foundation").price == Decimal("13.50")
        n = Book.objects.filter(title="Foundation").update(loan_period=F("loan_period") + TD(days=7),
                                                          pages=F("pages") + 255)
        assert n == 1
        b = Book.objects.get(title="Foundation")
        assert (b.loan_period, b.pages) == (TD(days=21), 255), (b.loan_period, b.pages)
        b.price = Decimal("12.50")
        b.save(update_fields=["price"])
        assert Book.objects.get(pk=b.pk).price == Decimal("12.50")

    with step("update(Subquery / Exists)"):
        reviewed = Exists(Review.objects.filter(book=OuterRef("pk")))
        best = Review.objects.filter(book=OuterRef("pk")).order_by("-rating").values("rating")[:1]
        n = Book.objects.filter(reviewed).update(pages=Subquery(best))
        assert n == 3, n
        n = Book.objects.update(
            in_print=Exists(Review.objects.filter(book=OuterRef("pk"), rating__gte=4)))
        assert n == 4, n
        rows = list(Book.objects.order_by("title").values_list("title", "pages", "in_print"))
        assert rows == [("Consider Phlebas", 0, False), ("Dune", 5, True), ("Foundation", 5, True),
                        ("The Dispossessed", 3, False)], rows
        Book.objects.filter(title="The Dispossessed").update(in_print=True)  # as before

    # ------------------------------------------------------------------ date / time (USE_TZ, UTC)
    with step("__month / __date / __year lookups"):
        B = Book.objects
        assert B.filter(published__year=2023).count() == 4
        assert B.filter(published__month=1).count() == 2
        assert B.filter(published__month=3).count() == 2
        assert set(B.filter(published__date=datetime.date(2023, 1, 31))
                   .values_list("title", flat=True)) == {"Foundation", "Dune"}
        assert B.filter(published__date__gte=datetime.date(2023, 3, 1)).count() == 2
        assert B.filter(published__day=31, published__hour=23).count() == 2
        assert B.filter(published__gte=datetime.datetime(2023, 3, 1, tzinfo=UTC)).count() == 2
        assert B.filter(published__range=(datetime.datetime(2023, 1, 31, 23, 15, tzinfo=UTC),
                                          datetime.datetime(2023, 2, 1, tzinfo=UTC))).get().title \
            == "Foundation"
        got = B.get(title="Dune").published
        assert got == datetime.datetime(2023, 1, 31, 23, 0, tzinfo=UTC) and got.utcoffset() == TD(0)

    with step("TruncMonth / TruncDate / dates()"):
        rows = list(Book.objects.annotate(m=TruncMonth("published")).values("m")
                    .annotate(n=Count("id")).order_by("m"))
        assert rows == [{"m": datetime.datetime(2023, 1, 1, tzinfo=UTC), "n": 2},
                        {"m": datetime.datetime(2023, 3, 1, tzinfo=UTC), "n": 2}], rows
        d = Book.objects.annotate(d=TruncDate("published")).values_list("d", flat=True) \
            .get(title="Dune")
        assert d == datetime.date(2023, 1, 31), d
        assert list(Book.objects.dates("published", "month")) == \
            [datetime.date(2023, 1, 1), datetime.date(2023, 3, 1)]

    # ------------------------------------------------------------------ json / uuid / duration
    with step("JSONField lookups"):
        B = Book.objects
        assert B.filter(metadata__genre="scifi").count() == 3
        assert set(B.filter(metadata__pages__gt=400).values_list("title", flat=True)) == \
            {"Dune", "Consider Phlebas"}
        assert B.filter(metadata__has_key="award").count() == 2
        assert B.filter(metadata__has_keys=["genre", "series"]).count() == 2
        assert B.filter(metadata__contains={"series": "Foundation"}).get().title == "Foundation"
        assert B.filter(metadata__dims__w=11).count() == 1
        assert B.filter(metadata__series__isnull=False).count() == 2
        assert list(B.filter(metadata__has_key="series").order_by("metadata__series")
                    .values_list("metadata__series", flat=True)) == ["Culture", "Foundation"]
        b = B.get(title="Dune")
        b.metadata["reprints"] = [2020, 2021]
        b.save()
        assert B.get(metadata__reprints__1=2021).metadata == {
            "genre": "scifi", "pages": 412, "award": "Nebula", "reprints": [2020, 2021]}

    with step("UUIDField lookups"):
        f = Book.objects.get(title="Foundation")
        assert isinstance(f.code, uuid.UUID)
        assert Book.objects.get(code=f.code).pk == f.pk
        assert Book.objects.get(code=str(f.code)).pk == f.pk
        assert Book.objects.filter(code__in=[f.code, uuid.uuid4()]).count() == 1
        assert Review.objects.filter(book__code=f.code).count() == 2
        r = Review.objects.get(body="spice")
        assert isinstance(r.pk, uuid.UUID)
        assert Review.objects.get(pk=str(r.pk)).body == "spice"
        assert Review.objects.filter(pk__in=[r.pk]).count() == 1

    with step("DurationField filter/F/Sum/Avg"):
        B = Book.objects
        assert set(B.filter(loan_period__gt=TD(days=14)).values_list("title", flat=True)) == \
            {"Dune", "Foundation"}
        assert B.filter(loan_period__lte=TD(days=7)).get().title == "The Dispossessed"
        due = ExpressionWrapper(F("published") + F("loan_period"), output_field=DateTimeField())
        b = B.annotate(due=due).get(title="Foundation")
        assert b.due == datetime.datetime(2023, 2, 21, 23, 30, tzinfo=UTC), b.due
        assert B.annotate(due=due).filter(due__lt=datetime.datetime(2023, 2, 15, tzinfo=UTC)) \
            .count() == 0
        assert B.aggregate(m=Max("loan_period"))["m"] == TD(days=21)
        # 21 (Foundation), 21 (Dune), 7 (The Dispossessed), 14 (Consider Phlebas, default)
        agg = B.aggregate(s=Sum("loan_period"), a=Avg("loan_period"))
        assert agg == {"s": TD(days=63), "a": TD(days=15, hours=18)}, agg
        rows = list(Publisher.objects.values("name").annotate(s=Sum("books__loan_period"),
                                                              a=Avg("books__loan_period"))
                    .order_by("name").values_list("name", "s", "a"))
        assert rows == [("Gollancz", TD(days=21), TD(days=21)),
                        ("Hayakawa", TD(days=14), TD(days=14)),
                        ("Tor", TD(days=28), TD(days=14))], rows
        assert B.filter(loan_period=F("loan_period") + TD(0)).count() == 4

    # ------------------------------------------------------------------ server-side cursor
    with step("iterator() (DECLARE/FETCH/CLOSE)"):
        titles = [b.title for b in Book.objects.order_by("title").iterator(chunk_size=2)]
        assert titles == sorted(Book.objects.values_list("title", flat=True)), titles
        assert len(titles) == Book.objects.count() and len(titles) > 2, titles
        with transaction.atomic():
            n = sum(1 for _ in Author.objects.all().iterator(chunk_size=1))
        assert n == Author.objects.count(), n

    # ------------------------------------------------------------------ deletes
    with step("delete SET_NULL"):
        Author.objects.get(name="Banks").delete()
        assert Book.objects.get(title="Dune").editor_id is None
        assert Book.objects.get(title="Foundation").translator_id is None  # 0004's FK
        assert Book.objects.get(title="Consider Phlebas").authors.count() == 0
        assert Book.objects.filter(editor__isnull=True).count() == 3

    with step("delete CASCADE"):
        n, per_model = Publisher.objects.get(name="Tor").delete()
        assert per_model == {"catalog.Publisher": 1, "catalog.Book": 2, "catalog.Review": 3,
                             "catalog.Book_authors": 2, "catalog.Book_tags": 3}, per_model
        assert Book.objects.count() == 2 and Review.objects.count() == 1
        n, _ = Review.objects.filter(rating__gte=5).delete()
        assert n == 1 and not Review.objects.exists()

    # ------------------------------------------------------------------ fixtures
    def load(objects):
        saved = sys.stdin
        sys.stdin = io.StringIO(json.dumps(objects))
        try:
            call_command("loaddata", "-", format="json", verbosity=0)
        finally:
            sys.stdin = saved

    with step("loaddata, children before parents"):
        # Rows reference rows later in the fixture: the keys are DEFERRABLE INITIALLY
        # DEFERRED, checked at loaddata's SET CONSTRAINTS ALL IMMEDIATE / COMMIT.
        load([{"model": "catalog.review", "pk": str(uuid.uuid4()),
               "fields": {"book": 900, "rating": 4, "body": "ocean"}},
              {"model": "catalog.book", "pk": 900,
               "fields": {"title": "Solaris", "publisher": 901, "price": "11.00",
                          "published": "2023-05-01T00:00:00Z", "code": str(uuid.uuid4())}},
              {"model": "catalog.publisher", "pk": 901,
               "fields": {"name": "Walker", "country": "USA"}}])
        assert Book.objects.get(pk=900).publisher.name == "Walker"
        assert Review.objects.get(book_id=900).body == "ocean"
        # loaddata reset the sequences past the fixture's keys.
        assert Publisher.objects.create(name="Next").pk > 901
        try:
            load([{"model": "catalog.book", "pk": 902,
                   "fields": {"title": "Orphan", "publisher": 999, "price": "1.00",
                              "published": "2023-05-01T00:00:00Z",
                              "code": str(uuid.uuid4())}}])
        except IntegrityError as e:
            got = getattr(e.__cause__, "pgcode", None)
            assert got == "23503", "expected SQLSTATE 23503, got %s (%s)" % (got, e)
        else:
            raise AssertionError("a fixture row without its publisher was loaded")
        assert not Book.objects.filter(pk=902).exists()

    # ------------------------------------------------------------------ flush / re-migrate
    with step("flush"):
        call_command("flush", interactive=False, verbosity=0)
        for model in (Book, Publisher, Author, Tag, Review, User, Group):
            assert model.objects.count() == 0, model
        assert ContentType.objects.filter(app_label="catalog").count() == 5  # re-created
        assert Publisher.objects.create(name="Again").pk == 1, "flush must RESTART IDENTITY"

    with step("second migrate is a no-op"):
        out = io.StringIO()
        call_command("migrate", interactive=False, verbosity=1, stdout=out)
        assert "No migrations to apply." in out.getvalue(), out.getvalue()
        executor = MigrationExecutor(connection)
        assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []

    print("DJANGO CHECK OK (%.1fs)" % (time.monotonic() - T0), flush=True)


if __name__ == "__main__":
    main()
