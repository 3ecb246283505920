# One image for the web and worker services of docker-compose.yml.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 POOLJUDGE_DATA_DIR=/data
WORKDIR /app
COPY pyproject.toml README.md ./
COPY pooljudge ./pooljudge
COPY accounts ./accounts
COPY campaigns ./campaigns
COPY pooling ./pooling
COPY assess ./assess
COPY qrels ./qrels
RUN pip install --no-cache-dir .
COPY . .
RUN useradd --system --uid 1000 pooljudge && mkdir -p /data && chown pooljudge /data
USER pooljudge
EXPOSE 8000
CMD ["gunicorn", "pooljudge.wsgi", "--preload", "--bind", "0.0.0.0:8000", "--workers", "4", "--timeout", "120", "--access-logfile", "-"]
