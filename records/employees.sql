-- name: CreateEmployeeImportTable
CREATE TEMP TABLE emp_in (line integer NOT NULL, employee_ref text NOT NULL,
employee_id text NOT NULL, name text NOT NULL) ON COMMIT DROP;

-- name: ImportEmployees
WITH given AS (
	SELECT DISTINCT ON (employee_ref) employee_ref, employee_id, name FROM emp_in ORDER BY employee_ref, line
), renamed AS (
	UPDATE employees e SET name = g.name FROM given g
	WHERE e.partner_id = @partner AND e.employee_ref = g.employee_ref AND g.name <> '' AND e.name <> g.name
	RETURNING 1
), added AS (
	INSERT INTO employees (partner_id, employee_ref, employee_id, name, source)
	SELECT @partner, employee_ref, employee_id, name, 'import' FROM given
	ON CONFLICT (partner_id, employee_ref) DO NOTHING
	RETURNING 1
)
SELECT (SELECT count(*) FROM added), (SELECT count(*) FROM renamed), (SELECT count(*) FROM given);

-- name: Employees
SELECT partner_id, employee_ref, employee_id, name, source, created_at
FROM employees WHERE partner_id = $1 ORDER BY employee_ref;

-- name: EmployeeConflicts
-- EmployeeConflicts finds every line of emp_in (the import) that would
-- change a stored mapping, give one employee_id to two references (within
-- the file or against any partner's mappings), or take an id of the form
-- derived ids have for another reference. One row per conflict, by line.
WITH first_ref AS (
	SELECT DISTINCT ON (employee_ref) employee_ref, employee_id, line FROM emp_in ORDER BY employee_ref, line
), first_id AS (
	SELECT DISTINCT ON (employee_id) employee_id, employee_ref, line FROM emp_in ORDER BY employee_id, line
)
SELECT line, msg FROM (
	SELECT i.line, format('line %s: employee_ref %s is given employee_id %s here but %s on line %s; a reference maps to one employee_id: keep only the right line', i.line, i.employee_ref, i.employee_id, f.employee_id, f.line) AS msg
	FROM emp_in i JOIN first_ref f ON f.employee_ref = i.employee_ref AND f.employee_id <> i.employee_id
	UNION ALL
	SELECT i.line, format('line %s: employee_id %s is given to employee_ref %s here and to %s on line %s; an employee_id names one worker: correct one of the two lines', i.line, i.employee_id, i.employee_ref, f.employee_ref, f.line)
	FROM emp_in i JOIN first_id f ON f.employee_id = i.employee_id AND f.employee_ref <> i.employee_ref
	UNION ALL
	SELECT i.line, format('line %s: employee_ref %s is already mapped to employee_id %s (%s, %s) and a mapping never changes: give it employee_id %s, or remove the line; a different worker needs a new employee_ref', i.line, i.employee_ref, e.employee_id, e.source, to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), e.employee_id)
	FROM emp_in i JOIN employees e ON e.partner_id = @partner AND e.employee_ref = i.employee_ref AND e.employee_id <> i.employee_id
	UNION ALL
	SELECT i.line, format('line %s: employee_id %s already belongs to employee_ref %s of partner %s; an employee_id names one worker: correct the employee_id', i.line, i.employee_id, e.employee_ref, e.partner_id)
	FROM emp_in i JOIN employees e ON e.employee_id = i.employee_id AND (e.partner_id <> @partner OR e.employee_ref <> i.employee_ref)
	UNION ALL
	SELECT i.line, format('line %s: employee_id %s has the form of the ids payintake derives for unknown references (emp_ and 20 hex digits) but is not the one of employee_ref %s (%s): use another employee_id', i.line, i.employee_id, i.employee_ref, derived_employee_id(@partner, i.employee_ref))
	FROM emp_in i WHERE i.employee_id ~ '^emp_[0-9a-f]{20}$' AND i.employee_id <> derived_employee_id(@partner, i.employee_ref)
) c ORDER BY line, msg;

