-- migrate:up
-- What tasks spent (issue 30, part 3): one row per attempt that reported its usage with its
-- result, inserted with that result's sealed RESULT_SUBMITTED event and never changed. A
-- task's spend is the sum of its rows; `status`, GET /v1/spend and /metrics sum them by task,
-- agent, repository and UTC day. Money is integer micro-units of an ISO 4217 currency, never a
-- float. `over_budget` marks the row whose usage took its task past a limit of its budget
-- (the task's metadata `budget`): that result is left for a person, and `review` skips it.
-- Numbered 0022 on both engines.
CREATE TABLE task_spend(
  spend_key TEXT PRIMARY KEY,
  task_id TEXT NOT NULL REFERENCES tasks(task_id),
  attempt INTEGER NOT NULL CHECK (attempt >= 1),
  agent_id TEXT,
  repository TEXT,
  day TEXT NOT NULL CHECK (length(day) = 10),
  input_tokens INTEGER NOT NULL CHECK (input_tokens >= 0),
  output_tokens INTEGER NOT NULL CHECK (output_tokens >= 0),
  cost_micros INTEGER NOT NULL CHECK (cost_micros >= 0),
  cost_currency TEXT CHECK (cost_currency IS NOT NULL OR cost_micros = 0),
  over_budget INTEGER NOT NULL DEFAULT 0 CHECK (over_budget IN (0, 1)),
  created_at TEXT NOT NULL,
  UNIQUE (task_id, attempt)
);
CREATE INDEX task_spend_by_day ON task_spend(day);

-- migrate:down
DROP INDEX task_spend_by_day;
DROP TABLE task_spend;
