-- A failed precondition inside a D1 batch: inserting a reason into batch_guards raises it as the
-- error message, which rolls back the whole batch. See src/db/batch.ts.
CREATE TRIGGER batch_guards_abort BEFORE INSERT ON batch_guards
BEGIN
  SELECT RAISE(ABORT, 'batch_guard:' || NEW.reason);
END;
