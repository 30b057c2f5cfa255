"""The database refuses to change or delete audit rows, whatever the code above it does.

The one update let through is the foreign key's ON DELETE SET NULL when the acting user is
deleted: actor_id becomes NULL and every other column stays as it was (actor_name keeps the
name). TRUNCATE (test flushes) is not a row operation and is not affected."""

from django.db import migrations

FORWARD = """
CREATE FUNCTION audit_auditevent_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.actor_id IS NULL
       AND to_jsonb(NEW) - 'actor_id' = to_jsonb(OLD) - 'actor_id' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'audit events are append-only: % of event % refused', TG_OP, OLD.id;
END
$$;
CREATE TRIGGER audit_auditevent_append_only
    BEFORE UPDATE OR DELETE ON audit_auditevent
    FOR EACH ROW EXECUTE FUNCTION audit_auditevent_append_only();
"""

BACKWARD = """
DROP TRIGGER audit_auditevent_append_only ON audit_auditevent;
DROP FUNCTION audit_auditevent_append_only();
"""


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
