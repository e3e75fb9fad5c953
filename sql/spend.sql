-- What tasks spent: one row per attempt that reported its usage.

-- fragment: spend_sums
CAST(COUNT(*) AS BIGINT) AS reports,
       CAST(SUM(input_tokens) AS BIGINT) AS input_tokens,
       CAST(SUM(output_tokens) AS BIGINT) AS output_tokens,
       CAST(SUM(cost_micros) AS BIGINT) AS cost_micros,
       CAST(SUM(over_budget) AS BIGINT) AS over_budget

-- name: task_spend_totals
-- returns: SpendTotals
-- A task's spend before a submit, with how many currencies its cost came in (the core holds
-- only a single currency's sum against a budget).
SELECT CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT) AS input_tokens,
       CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT) AS output_tokens,
       CAST(COALESCE(SUM(cost_micros), 0) AS BIGINT) AS cost_micros,
       MIN(cost_currency) AS cost_currency,
       CAST(COUNT(DISTINCT cost_currency) AS BIGINT) AS currencies
FROM task_spend WHERE task_id = :task_id;

-- name: spend_by_task
-- The spend of each task that reported any, largest cost first, per currency (NULL: no cost).
SELECT task_id, cost_currency, CAST(COUNT(*) AS BIGINT) AS reports,
       CAST(SUM(input_tokens) AS BIGINT) AS input_tokens,
       CAST(SUM(output_tokens) AS BIGINT) AS output_tokens,
       CAST(SUM(cost_micros) AS BIGINT) AS cost_micros, MAX(over_budget) AS over_budget
FROM task_spend
GROUP BY task_id, cost_currency
ORDER BY SUM(cost_micros) DESC, SUM(input_tokens) + SUM(output_tokens) DESC, task_id
LIMIT :limit;

-- name: spend_by_agent
SELECT agent_id, cost_currency, {{spend_sums}}
FROM task_spend
GROUP BY agent_id, cost_currency
ORDER BY agent_id, cost_currency
LIMIT :limit;

-- name: spend_by_repository
SELECT repository, cost_currency, {{spend_sums}}
FROM task_spend
GROUP BY repository, cost_currency
ORDER BY repository, cost_currency
LIMIT :limit;

-- name: spend_by_day
SELECT day, cost_currency, {{spend_sums}}
FROM task_spend
GROUP BY day, cost_currency
ORDER BY day DESC, cost_currency
LIMIT :limit;

-- name: spend_by_agent_and_repository
-- What /metrics counts: the spend of each agent in each repository, per currency.
SELECT agent_id, repository, cost_currency, {{spend_sums}}
FROM task_spend
GROUP BY agent_id, repository, cost_currency
ORDER BY agent_id, repository, cost_currency
LIMIT :limit;
