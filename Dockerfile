# One image for the gateway, the worker and the local DynamoDB (docker-compose.yml and
# deploy/k8s/ pick the command). Two stages: the build stage compiles src/ to dist/ and builds
# the browser pages; the runtime stage holds production dependencies, dist/, lua/ and the pages,
# and runs as the unprivileged `node` user. Node 24 is the current LTS.

# --- build: every dependency, TypeScript compiled, pages built ---
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# postinstall (patch-package) patches the local DynamoDB; scripts/ has ensure-installed.mjs.
COPY patches ./patches
COPY scripts ./scripts
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

# --- runtime: production dependencies and the built output only ---
FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production
# Stack traces name src/ lines (dist/ carries source maps).
ENV NODE_OPTIONS=--enable-source-maps
WORKDIR /app
COPY package.json package-lock.json ./
COPY patches ./patches
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY --from=build /app/lua ./lua
COPY --from=build /app/waiting-room/dist ./waiting-room/dist
# The local DynamoDB's data directory (docker-compose.yml mounts a volume there): a named volume
# takes this ownership, so the unprivileged user can write it.
RUN mkdir -p /data && chown node:node /data
USER node
# 8080: the gateway's HTTP; 8081: the workers' health server (WORKER_HEALTH_PORT); 8000: the local DynamoDB.
EXPOSE 8080 8081
# Liveness of whatever serves on PORT (the gateway); the worker and the local DynamoDB have their
# own checks in docker-compose.yml. No curl in the slim image: Node's fetch does it.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/livez').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Exec form: node is PID 1 and gets SIGTERM itself (readiness off, drain, close).
CMD ["node", "dist/main.js"]
