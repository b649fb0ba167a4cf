-- earth_point and earth_km with the radius written out. 0009 let earth_point be inlined, but
-- the planner folds the immutable, argument-less earth_radius_km() inside it by running it:
-- the SQL function machinery parses and plans its body each time. An insert into items_view
-- or loans_view plans its `earth` column once per statement, so it paid that three times:
-- about 50 µs an insert (pgbench, prepared INSERT into a table with the generated column,
-- 318 against 369 µs). The same constant, so every stored point stays as it is.
CREATE OR REPLACE FUNCTION earth_point(lat float8, lng float8) RETURNS cube
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT cube(cube(cube(6371.0088::float8 * cos(radians(lat)) * cos(radians(lng))),
                     6371.0088::float8 * cos(radians(lat)) * sin(radians(lng))),
                6371.0088::float8 * sin(radians(lat)))
$$;

CREATE OR REPLACE FUNCTION earth_km(a cube, b cube) RETURNS float8
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT 2 * 6371.0088::float8 * asin(least(1.0, cube_distance(a, b) / (2 * 6371.0088::float8)))
$$;
