CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE, role TEXT NOT NULL DEFAULT 'member', created_at TEXT NOT NULL);
CREATE TABLE projects (id INTEGER PRIMARY KEY, owner_id INTEGER NOT NULL REFERENCES users(id), name TEXT NOT NULL);
INSERT INTO users VALUES (1, 'user01@umbrella.example', 'admin', '2023-06-08');
INSERT INTO users VALUES (2, 'user02@umbrella.example', 'member', '2023-11-15');
INSERT INTO users VALUES (3, 'user03@umbrella.example', 'member', '2023-04-22');
INSERT INTO projects VALUES (1, 1, 'project-1');
INSERT INTO projects VALUES (2, 1, 'project-2');
