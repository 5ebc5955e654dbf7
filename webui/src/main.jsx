// Locust's web UI (its `locust-ui` library) with the swarm's LLM tab drawn as live charts.
//
// The master serves the series at ./llm/series (swarm/live/series.py): per key (Total, each
// workload, each workload's request classes) TTFT/TPOT/ITL/E2E percentiles over the last 10 s,
// requests/s, output tok/s and goodput, plus requests in flight and users; stage changes (sweep
// stages, open-loop rates, search probes) come as markers. Below the charts: the LLM table as before
// (the `llm` extended stats the master adds to /stats/requests).
import { createRoot } from "react-dom/client";
import { useMemo, useState } from "react";
import { useSelector } from "react-redux";
import LocustUi, { LineChart, Table, useInterval } from "locust-ui";
import Box from "@mui/material/Box";
import FormControl from "@mui/material/FormControl";
import InputLabel from "@mui/material/InputLabel";
import MenuItem from "@mui/material/MenuItem";
import MuiSelect from "@mui/material/Select";
import Typography from "@mui/material/Typography";

const TAB_KEY = "llm";
const POLL_MS = 2000;
const EMPTY = { time: [], in_flight: [], users: [], series: {}, markers: [], window_s: 10 };

// [time, value] pairs, as Locust's own charts take them (null: a gap)
const pairs = (time, values) => time.map((t, i) => [t, values && values[i] != null ? values[i] : null]);

// Stage changes as dashed vertical lines, labelled. locust-ui's LineChart registers no echarts
// markLine component (its own "Run #n" markers do not draw), so each change is a vertical segment of
// one more line series, "stage changes": [t, 0] -> [t, top], then a gap. A line's extra options
// (lineStyle, symbol) pass through LineChart to its echarts series.
const STAGE_KEY = "__stages";
const STAGE_COLOR = "#8a8a8a";

// a label near the right edge goes left of its line, so the chart does not cut it
const labelSide = (t, time) => {
  if (time.length < 2) return "right";
  const [first, last] = [Date.parse(time[0]), Date.parse(time[time.length - 1])];
  return Date.parse(t) > first + 0.8 * (last - first) ? "left" : "right";
};

const stageSegments = (markers, top, time) =>
  markers.flatMap((m) => [
    { value: [m.time, 0], symbolSize: 0 },
    {
      value: [m.time, top],
      symbolSize: 0,
      label: {
        show: true,
        formatter: m.label,
        position: labelSide(m.time, time),
        fontSize: 11,
        color: STAGE_COLOR,
      },
    },
    [m.time, null],
  ]);

const maxOf = (...columns) => {
  let top = 0;
  for (const col of columns) for (const v of col || []) if (v != null && v > top) top = v;
  return top || 1;
};

const COLORS = ["#2f7ed8", "#d9534f", "#2ca02c"];
// time axis with 24 h labels that skip rather than overlap on a half-width chart
const X_AXIS = {
  type: "time",
  minInterval: 1,
  axisLabel: {
    hideOverlap: true,
    formatter: (t) => new Date(t).toLocaleTimeString([], { hour12: false }),
  },
};

const CHARTS = [
  {
    title: "TTFT (ms)",
    lines: [
      { name: "TTFT p50", key: "ttft_p50_ms" },
      { name: "TTFT p99", key: "ttft_p99_ms" },
    ],
  },
  {
    title: "TPOT / ITL (ms)",
    lines: [
      { name: "TPOT p50", key: "tpot_p50_ms" },
      { name: "ITL p99", key: "itl_p99_ms" },
    ],
  },
  {
    title: "E2E (ms)",
    lines: [
      { name: "E2E p50", key: "e2e_p50_ms" },
      { name: "E2E p99", key: "e2e_p99_ms" },
    ],
  },
  {
    title: "Output tokens/s and requests/s",
    splitAxis: true,
    yAxisLabels: ["tok/s", "req/s"],
    lines: [
      { name: "output tok/s", key: "output_tok_s" },
      { name: "requests/s", key: "qps", yAxisIndex: 1 },
    ],
  },
  {
    title: "Goodput: requests/s meeting --goodput (none without it)",
    lines: [
      { name: "requests/s", key: "qps" },
      { name: "goodput", key: "goodput" },
    ],
  },
];

function Chart({ title, lines, splitAxis, yAxisLabels, time, columns, markers, isDarkMode }) {
  const charts = useMemo(() => {
    const out = { time };
    for (const { key } of lines) out[key] = pairs(time, columns[key]);
    // on a split-axis chart the stage lines follow the second axis
    const axisLines = splitAxis ? lines.filter((l) => l.yAxisIndex === 1) : lines;
    out[STAGE_KEY] = stageSegments(markers, maxOf(...axisLines.map((l) => columns[l.key])), time);
    return out;
  }, [time, columns, lines, markers, splitAxis]);
  const withMarks = useMemo(
    () => [
      ...lines,
      {
        name: "stage changes",
        key: STAGE_KEY,
        yAxisIndex: splitAxis ? 1 : undefined,
        showAllSymbol: true,
        lineStyle: { type: "dashed", width: 1 },
      },
    ],
    [lines, splitAxis],
  );
  return (
    <LineChart
      charts={charts}
      title={title}
      lines={withMarks}
      splitAxis={splitAxis}
      yAxisLabels={yAxisLabels}
      colors={[...COLORS.slice(0, lines.length), STAGE_COLOR]}
      xAxis={X_AXIS}
      isDarkMode={isDarkMode}
    />
  );
}

const IN_FLIGHT_LINES = [
  { name: "in flight", key: "in_flight" },
  { name: "users", key: "users" },
];

function LlmTab() {
  const [data, setData] = useState(EMPTY);
  const [key, setKey] = useState("Total");
  const [error, setError] = useState(null);
  const isDarkMode = useSelector(({ theme }) => theme.isDarkMode);
  const stats = useSelector(({ ui }) => (ui.extendedStats || []).find((s) => s.key === TAB_KEY));
  const table = useSelector(({ swarm }) => (swarm.extendedTables || []).find((t) => t.key === TAB_KEY));

  useInterval(
    () => {
      fetch("./llm/series")
        .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`HTTP ${r.status}`))))
        .then((d) => {
          setData(d);
          setError(null);
        })
        .catch((e) => setError(String(e)));
    },
    POLL_MS,
    { shouldRunInterval: true, immediate: true },
  );

  const keys = Object.keys(data.series);
  const columns = data.series[key] || data.series.Total || {};
  const flight = useMemo(
    () => ({ in_flight: data.in_flight, users: data.users }),
    [data.in_flight, data.users],
  );

  return (
    <Box data-testid="llm-charts">
      <Box sx={{ display: "flex", alignItems: "center", gap: 2, mb: 1 }}>
        <FormControl size="small" sx={{ minWidth: 220 }}>
          <InputLabel id="llm-key-label">Workload / class</InputLabel>
          <MuiSelect
            labelId="llm-key-label"
            label="Workload / class"
            value={keys.includes(key) ? key : "Total"}
            onChange={(e) => setKey(e.target.value)}
            data-testid="llm-key"
          >
            {(keys.length ? keys : ["Total"]).map((k) => (
              <MenuItem key={k} value={k}>
                {k}
              </MenuItem>
            ))}
          </MuiSelect>
        </FormControl>
        <Typography variant="body2" color="text.secondary">
          Percentiles over the last {data.window_s} s; {data.time.length} points
          {data.markers.length ? `; ${data.markers.length} stage changes marked` : ""}
          {error ? ` (update failed: ${error})` : ""}
        </Typography>
      </Box>
      <Box sx={{ display: "grid", gridTemplateColumns: { xs: "1fr", lg: "1fr 1fr" }, gap: 1 }}>
        {CHARTS.map((c) => (
          <Chart
            key={c.title}
            {...c}
            time={data.time}
            columns={columns}
            markers={data.markers}
            isDarkMode={isDarkMode}
          />
        ))}
        <Chart
          title="Requests in flight"
          lines={IN_FLIGHT_LINES}
          time={data.time}
          columns={flight}
          markers={data.markers}
          isDarkMode={isDarkMode}
        />
      </Box>
      {table && stats ? <Table rows={stats.data} structure={table.structure} /> : null}
    </Box>
  );
}

// the master's template args, as Locust writes them (snake_case; locust-ui camelCases its own copy)
const args = window.templateArgs || {};
const extendedTabs = (args.extended_tabs || []).map((t) =>
  t.key === TAB_KEY ? { ...t, component: LlmTab } : t,
);

createRoot(document.getElementById("root")).render(
  <LocustUi
    extendedTabs={extendedTabs}
    extendedTables={args.extended_tables}
    extendedReports={args.extended_csv_files}
  />,
);
